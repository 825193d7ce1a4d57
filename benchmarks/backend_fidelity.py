"""How far two procgen builds agree: the same games, seeds and actions under two Pythons.

proclab runs procgen 0.10.7 through ``procgen2`` on Python 3.11 (``procgen-mirror`` on 3.12) and
through ``procgen-gym`` on 3.13 (:mod:`proclab.envs._procgen`). Both compile procgen's C++
sources, but against different Qt versions, so the game logic should agree exactly and the
rendered pixels may not. This script runs each interpreter's backend on every game, with
backgrounds on and off, from the same seed and the same random actions, and compares:

* rewards, ``first`` flags (episode ends), level seeds: identical or not;
* ``get_state`` bytes of every env, every ``--state-every`` steps: identical or not;
* 64x64 observations: fraction of pixels (any channel) and of frames that differ, and the
  largest channel difference;
* 512x512 renders (``render_mode="rgb_array"``) over the first ``--human-steps`` steps: the same.

One JSON line per game and background setting, then a summary line. Each interpreter records in a
child process (``--record DIR``); the parent compares. Example (about 4 minutes on 2 cores):

    python benchmarks/backend_fidelity.py --python-a .venv/bin/python --python-b .venv313/bin/python
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from proclab.envs import GAMES


def record(out: Path, games: list[str], actions: np.ndarray, seed: int, state_every: int, human_steps: int):
    """Child side: play ``actions`` (steps x envs) on every game with this interpreter's backend."""
    from proclab.envs._procgen import NAME, ProcgenBackend

    (out / "backend.txt").write_text(NAME)
    steps, n = actions.shape
    for game in games:
        for backgrounds in (True, False):
            options = dict(distribution_mode="easy", num_levels=0, start_level=0, use_backgrounds=backgrounds)
            env = ProcgenBackend(num=n, game=game, rand_seed=seed, **options)
            obs, rew, first, level, states = [], [], [], [], []
            for t in range(steps):
                env.act(actions[t])
                rgb, r, f, info = env.observe()
                obs.append(rgb.copy())
                rew.append(r.copy())
                first.append(f.copy())
                level.append(np.asarray(info["level_seed"], np.int64).copy())
                if t % state_every == 0 or t == steps - 1:
                    states.append([hashlib.sha256(s).hexdigest() for s in env.get_state()])
            env.close()
            human = ProcgenBackend(num=1, game=game, rand_seed=seed, render_mode="rgb_array", **options)
            frames = []
            for t in range(human_steps):
                human.act(actions[t, :1])
                frames.append(human.observe()[3]["rgb"].copy())
            human.close()
            np.savez_compressed(
                out / f"{game}-{int(backgrounds)}.npz",
                obs=np.stack(obs),
                reward=np.stack(rew),
                first=np.stack(first),
                level_seed=np.stack(level),
                states=np.array(states),
                human=np.stack(frames) if frames else np.zeros((0, 1, 512, 512, 3), np.uint8),
            )
            print(f"recorded {game} backgrounds={backgrounds}", file=sys.stderr)


def pixel_stats(a: np.ndarray, b: np.ndarray) -> dict:
    """Differences between two stacks of HWC frames (leading axes: steps, envs)."""
    if a.size == 0:
        return {"pixels": None, "frames": None, "max_abs": None}
    differs = (a != b).any(axis=-1)  # a pixel differs if any of its channels does
    frames = differs.reshape(*differs.shape[:-2], -1).any(axis=-1)
    return {
        "pixels": float(differs.mean()),
        "frames": float(frames.mean()),
        "max_abs": int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max()),
    }


def compare(dir_a: Path, dir_b: Path, game: str, backgrounds: bool) -> dict:
    name = f"{game}-{int(backgrounds)}.npz"
    a, b = np.load(dir_a / name), np.load(dir_b / name)
    obs, human = pixel_stats(a["obs"], b["obs"]), pixel_stats(a["human"], b["human"])
    return {
        "game": game,
        "backgrounds": backgrounds,
        "rewards_equal": bool(np.array_equal(a["reward"], b["reward"])),
        "dones_equal": bool(np.array_equal(a["first"], b["first"])),
        "level_seeds_equal": bool(np.array_equal(a["level_seed"], b["level_seed"])),
        "states_equal": bool(np.array_equal(a["states"], b["states"])),
        "episodes_ended": int(a["first"].sum()),
        "obs_pixel_fraction_differing": obs["pixels"],
        "obs_frame_fraction_differing": obs["frames"],
        "obs_max_abs_diff": obs["max_abs"],
        "human_pixel_fraction_differing": human["pixels"],
        "human_frame_fraction_differing": human["frames"],
    }


def run_child(python: str, out: Path, args, actions_file: Path) -> str:
    cmd = [python, __file__, "--record", str(out), "--actions", str(actions_file), "--games", args.games]
    cmd += [
        "--seed",
        str(args.seed),
        "--state-every",
        str(args.state_every),
        "--human-steps",
        str(args.human_steps),
    ]
    subprocess.run(cmd, check=True)
    return (out / "backend.txt").read_text()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python-a", default=".venv/bin/python", help="interpreter of the reference backend")
    p.add_argument("--python-b", default=".venv313/bin/python", help="interpreter of the compared backend")
    p.add_argument("--games", default=",".join(GAMES), help="comma-separated games (default: all 16)")
    p.add_argument("--steps", type=int, default=500, help="steps per game and background setting")
    p.add_argument("--envs", type=int, default=4, help="parallel envs (distinct levels) per game")
    p.add_argument("--seed", type=int, default=0, help="procgen's rand_seed (which levels are drawn)")
    p.add_argument("--state-every", type=int, default=50, help="compare get_state bytes every N steps")
    p.add_argument("--human-steps", type=int, default=20, help="steps whose 512x512 renders are compared")
    p.add_argument("--record", type=Path, help=argparse.SUPPRESS)  # child mode: record into this folder
    p.add_argument("--actions", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    games = args.games.split(",")
    if args.record:
        record(args.record, games, np.load(args.actions), args.seed, args.state_every, args.human_steps)
        return
    with tempfile.TemporaryDirectory(prefix="proclab-fidelity-") as tmp:
        tmp = Path(tmp)
        actions_file = tmp / "actions.npy"
        np.save(
            actions_file, np.random.default_rng(args.seed).integers(0, 15, (args.steps, args.envs), np.int32)
        )
        backends = []
        for side, python in (("a", args.python_a), ("b", args.python_b)):
            (tmp / side).mkdir()
            backends.append(run_child(python, tmp / side, args, actions_file))
        rows = []
        for game in games:
            for backgrounds in (True, False):
                row = {
                    "backend_a": backends[0],
                    "backend_b": backends[1],
                    "steps": args.steps,
                    "envs": args.envs,
                }
                row.update(compare(tmp / "a", tmp / "b", game, backgrounds))
                rows.append(row)
                print(json.dumps(row), flush=True)
    logic = ("rewards_equal", "dones_equal", "level_seeds_equal", "states_equal")
    print(
        json.dumps(
            {
                "summary": True,
                "configs": len(rows),
                "logic_identical": sum(all(r[k] for k in logic) for r in rows),
                "obs_identical": sum(r["obs_pixel_fraction_differing"] == 0 for r in rows),
                "human_identical": sum(r["human_pixel_fraction_differing"] == 0 for r in rows),
                "max_obs_pixel_fraction_differing": max(r["obs_pixel_fraction_differing"] for r in rows),
            }
        )
    )


if __name__ == "__main__":
    main()
