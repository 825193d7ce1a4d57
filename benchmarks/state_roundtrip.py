"""Game-state round trips at scale: every game, easy and hard, >= 1,000 states each.

States come from unbounded random levels at random points of episodes (uniformly random actions;
each env's state kept with probability 0.05 after each step, see ``proclab.envs.state.sample``).
Each is parsed and serialized again; the bytes must be identical. ``unnamed`` counts states holding
an entity type or cell value the glossary does not name. One JSON line per game/mode:

    {"game": "coinrun", "mode": "easy", "states": 1000, "identical": 1000, "unnamed": 0, "mean_bytes": ...,
     "parse_us": ..., "serialize_us": ..., "features_us": ..., "get_state_us": ...,
     "parse_ratio_to_get_state": ...}

Times are medians per state, in microseconds, on this CPU. ``get_state_us`` is the baseline measured
in the same run: procgen's own ``get_state`` of one env (the C++ serializer and the copy to Python),
so ``parse_ratio_to_get_state`` says how much reading a state costs next to taking it. The exit
status is 1 if any state did not round-trip. Quick run:

    python benchmarks/state_roundtrip.py --games coinrun,maze --states 100
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from proclab.envs._procgen import ProcgenBackend
from proclab.envs.games import GAMES
from proclab.envs.state import features, glossary, parse_state, serialize_state
from proclab.envs.state.sample import random_states


def _timed(fn, arg):
    start = time.perf_counter()
    result = fn(arg)
    return result, (time.perf_counter() - start) * 1e6


def get_state_us(game: str, mode: str, repeats: int = 200) -> float:
    backend = ProcgenBackend(1, game, distribution_mode=mode, num_levels=0, start_level=0, rand_seed=0)
    try:
        times = [_timed(lambda _: backend.get_state(), None)[1] for _ in range(repeats)]
    finally:
        backend.close()
    return statistics.median(times)


def measure(game: str, mode: str, count: int, seed: int) -> dict:
    identical, unnamed, sizes, parse, serialize, feats = 0, 0, [], [], [], []
    cells = set(glossary(game).cells)
    for data in random_states(game, mode, count, seed=seed):
        state, t_parse = _timed(parse_state, data)
        unnamed += any(e.kind.startswith("type") for e in state.entities) or not cells.issuperset(
            state.grid.flat
        )
        again, t_serialize = _timed(serialize_state, state)
        feats.append(_timed(features, state)[1])
        identical += again == data
        sizes.append(len(data))
        parse.append(t_parse)
        serialize.append(t_serialize)
    baseline = get_state_us(game, mode)
    return {
        "game": game, "mode": mode, "states": len(sizes), "identical": identical, "unnamed": unnamed,
        "mean_bytes": round(statistics.mean(sizes)), "parse_us": round(statistics.median(parse), 1),
        "serialize_us": round(statistics.median(serialize), 1), "features_us": round(statistics.median(feats), 1),
        "get_state_us": round(baseline, 1), "parse_ratio_to_get_state": round(statistics.median(parse) / baseline, 2),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", default=",".join(GAMES), help="comma-separated games (default: all 16)")
    parser.add_argument("--modes", default="easy,hard", help="comma-separated distribution modes")
    parser.add_argument("--states", type=int, default=1000, help="states per game and mode")
    parser.add_argument("--seed", type=int, default=0, help="seed of levels, actions and sampling")
    args = parser.parse_args()
    failed = False
    for game in args.games.split(","):
        for mode in args.modes.split(","):
            print(f"{game} {mode} ...", file=sys.stderr, flush=True)
            row = measure(game, mode, args.states, args.seed + GAMES.index(game))
            failed |= row["identical"] != row["states"]
            print(json.dumps(row), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
