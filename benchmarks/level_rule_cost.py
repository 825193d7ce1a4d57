"""The cost of a level rule in the vector env: CPU time per step with and without ``coin-moved``, one run.

A rule edits each level at its episode start: :class:`proclab.envs.ProcgenVecEnv` reads the game state of the
slots whose episodes just began, edits it and restarts them. Reading one slot is one procgen serialization; the
first version read every slot (``slot_states()``) at every episode start, so its cost grew with the number of
envs. Three variants step the same CoinRun envs with the same random actions: ``plain`` (no rule), ``rule``
(the vector env as it is), ``rule-all-slots`` (the same rule with every slot read at each start, the earlier
path, patched in for the comparison). Rounds alternate the order; each variant's best round is kept. Prints
one JSON line per variant: CPU seconds per 1,000 env steps, its ratio to ``plain``, and the CPU time over
``plain`` per episode played (what each episode start costs the rule)::

    python benchmarks/level_rule_cost.py --envs 32 --steps 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from unittest import mock

import numpy as np

from proclab.envs import EnvConfig, ProcgenVecEnv


def _all_slots(self, slot: int) -> bytes:
    return self.slot_states()[slot]


def play(envs: int, steps: int, rule: str, all_slots: bool) -> tuple[float, int]:
    env = ProcgenVecEnv(EnvConfig(game=("coinrun",), num_envs=envs, level_rule=rule), seed=0)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 15, (steps, envs))
    patch = (
        mock.patch.object(ProcgenVecEnv, "slot_state", _all_slots) if all_slots else contextlib.nullcontext()
    )
    with patch:
        env.reset()
        episodes = 0
        start = time.process_time()
        for a in actions:
            episodes += int(env.step(a)[4]["episode"]["done"].sum())
        cpu = time.process_time() - start
    env.close()
    return cpu, episodes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", type=int, default=32)
    ap.add_argument("--steps", type=int, default=2000, help="vector steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    variants = {"plain": ("", False), "rule": ("coin-moved", False), "rule-all-slots": ("coin-moved", True)}
    best: dict[str, tuple[float, int]] = {}
    for r in range(args.rounds):
        names = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in names:
            cpu, episodes = play(args.envs, args.steps, *variants[name])
            if name not in best or cpu < best[name][0]:
                best[name] = (cpu, episodes)
    env_steps = args.envs * args.steps
    for name, (cpu, episodes) in best.items():
        print(json.dumps({"variant": name, "envs": args.envs, "env_steps": env_steps, "episodes": episodes,
                          "cpu_s_per_1000_steps": round(1000 * cpu / env_steps, 4),
                          "ratio_to_plain": round(cpu / best["plain"][0], 3),
                          "extra_cpu_ms_per_episode": round(1000 * (cpu - best["plain"][0]) / max(episodes, 1), 2)}),
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
