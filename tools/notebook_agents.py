"""The small agents proclab ships (``proclab.load("coinrun/small")``, ``proclab.load("maze/small")``): trained
here, checked against the bars the notebooks' prose states, and copied into the package.

The notebooks, the API example (``examples/five_experiments.py``) and the tests play them, so the docs build
trains nothing and reads the same agent on every machine. Both train on easy levels ``[0, 1M)``, so
``levels="held-out"`` is ``[1M, 1M + 200)``, on a CPU with ``--precision auto`` (bf16 where the CPU has it
natively: about 3x the speed of fp32 there; the shipped agent is read in fp32 like any other), resumable::

    python tools/notebook_agents.py train coinrun --runs /work/agents      # again to continue a stopped run
    python tools/notebook_agents.py check coinrun RUN_DIR                  # the bars on held-out levels
    python tools/notebook_agents.py ship coinrun RUN_DIR --steps 25600 ...   # checkpoints into the package

The CoinRun agent is a proclab PPO run (the ``quickstart`` preset: the interpreting-rl-behavior architecture at
half its channels, FC 64 and a GRU of 64), kickstarted (``--teacher``, docs/ppo.md) by the coin planner on the
ground truth: PPO alone on two cores stopped far below the bar (0.54 of held-out levels after 1M steps). The
teacher's weight decays to 0 by 400k steps, after which PPO alone improves on the planner (which dies on enemies
and lava). The Maze agent imitates the cheese planner (:mod:`proclab.rl.imitation`: DAgger, the mouse's and the
cheese's cells as auxiliary targets): PPO alone reached the cheese on 0.44 of held-out mazes (its best checkpoint
of 1M steps), and kickstarting taught it nothing in 150k steps, since its torso never found the mouse. It is the
Procgen paper's feed-forward IMPALA agent (16-32-32, FC 256), the architecture of the field's maze agents.

``check`` prints one JSON line per measure: the share of held-out levels completed (CoinRun) or whose cheese
was reached (Maze), with its exact interval, over ``--levels`` distinct levels, sampled actions.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import proclab
from proclab.envs import EnvConfig
from proclab.io.checkpoint import META, WEIGHTS, find_checkpoint
from proclab.models.bundled import BUNDLED, bundled_path
from proclab.rl.imitation import ImitationConfig, imitate


@dataclass(frozen=True)
class Spec:
    game: str
    steps: int
    bar: float
    """The share of held-out levels the notebooks' prose needs (completed; for Maze, cheese reached)."""
    rule: str = "none"
    """The level rule of its training levels (and so of its held-out ones)."""
    teacher: str = "None"
    """The planner that kickstarts it (``--teacher``): PPO on two cores alone stopped far below the bars."""
    teacher_steps: int = 0
    """Steps over which the teacher's weight decays to 0 (``--teacher-steps``; 0: it teaches throughout)."""
    imitation: dict | None = None
    """Trained by imitating ``teacher`` (:class:`~proclab.rl.imitation.ImitationConfig`'s fields) instead of
    PPO; ``steps`` is then unused."""


SPECS = {
    # the coin planner completes 0.69 of held-out levels (it dies on enemies and lava): PPO takes over from it
    "coinrun": Spec("coinrun", 2_000_000, 0.70, teacher="coin-planner", teacher_steps=400_000),
    # the goal-misgeneralization setting: the cheese always in the top-right 5 x 5 cells while it trains, so on
    # standard mazes it may go for the corner; its own held-out mazes keep the rule
    "maze": Spec(
        "maze",
        0,
        0.80,
        "cheese-region:size=5",
        "cheese-planner",
        imitation=dict(rounds=3, frames=160_000, epochs=2),
    ),
}
TRAIN = ["--preset", "quickstart", "--mode", "easy", "--split", "train-1m", "--precision", "auto",
         "--val-split", "None", "--no-tensorboard", "--checkpoint-every", "25000", "--torch-threads", "1"]  # fmt: skip


def train(name: str, runs: Path, seed: int) -> None:
    spec = SPECS[name]
    if spec.imitation is not None:
        imitate_run(spec, runs, seed)
        return
    existing = sorted((runs / "ppo" / spec.game / f"small-{name}").glob(f"{seed}-*/config.json"))
    if existing:
        cmd = ["--resume", str(existing[-1].parent), "--total-steps", str(spec.steps)]
    else:
        cmd = [*TRAIN, "--game", spec.game, "--level-rule", spec.rule, "--teacher", spec.teacher,
               "--teacher-steps", str(spec.teacher_steps), "--total-steps", str(spec.steps),
               "--seed", str(seed), "--run-root", str(runs), "--name", f"small-{name}"]  # fmt: skip
    subprocess.run([sys.executable, "-m", "proclab", "train", *cmd], check=True)


def imitate_run(spec: Spec, runs: Path, seed: int) -> None:
    """Imitate the spec's teacher on easy levels ``[0, 1M)``, or resume this seed's run."""
    existing = sorted((runs / "imitation" / spec.game / f"small-{spec.game}").glob(f"{seed}-*/config.json"))
    if existing:
        # to the spec's rounds: a recipe given more rounds continues its run
        print("resumed", imitate(run_dir=existing[-1].parent, rounds=(spec.imitation or {}).get("rounds")))
        return
    env = EnvConfig(game=(spec.game,), mode="easy", split="train-1m", level_rule=spec.rule)
    config = ImitationConfig(
        env=env,
        teacher=spec.teacher,
        seed=seed,
        run_root=runs,
        name=f"small-{spec.game}",
        **(spec.imitation or {}),
    )
    print("trained", imitate(config))


def check(name: str, run: str, levels: int, split: str = "held-out") -> dict:
    agent = proclab.load(run)
    ro = proclab.rollout(agent, levels=split, episodes=levels, num_envs=min(levels, 64), truth=True, seed=0)
    reached = ro.goals["cheese"] if name == "maze" else ro.level_complete
    p = proclab.stats.proportion(reached.numpy())
    row = {"agent": name, "run": str(run), "split": split, "levels": levels, "measure": "cheese" if name == "maze" else "complete",
           "share": p.share, "ci95": list(p.ci), "bar": SPECS[name].bar, "meets_bar": p.ci.low >= SPECS[name].bar,
           "mean_length": float(ro.lengths.float().mean())}  # fmt: skip
    print(json.dumps(row))
    return row


def ship(name: str, run: str, steps: list[int]) -> Path:
    """The run's checkpoints at ``steps`` (default: its last) as a run folder of the package, weights and configs
    only: ``proclab.load`` takes the last, T-REX's demos all of them (checkpoints of varied skill)."""
    chosen = (
        [find_checkpoint(run)] if not steps else [Path(run) / "checkpoints" / f"step_{s:012d}" for s in steps]
    )
    target = bundled_path(f"{SPECS[name].game}/small")
    if target.exists():
        shutil.rmtree(target)
    for checkpoint in chosen:
        folder = target / "checkpoints" / checkpoint.name
        folder.mkdir(parents=True)
        shutil.copyfile(checkpoint / WEIGHTS, folder / WEIGHTS)
        meta = json.loads((checkpoint / META).read_text())
        meta["train"]["run_root"] = "runs"  # where it was trained says nothing to its users
        (folder / META).write_text(json.dumps(meta, indent=1) + "\n")
        print(f"shipped {checkpoint} as {folder}")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="train (or continue) an agent's run")
    p.add_argument("name", choices=SPECS)
    p.add_argument("--runs", type=Path, default=Path("runs"))
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("check", help="the notebooks' bar on held-out levels")
    p.add_argument("name", choices=SPECS)
    p.add_argument("run", nargs="?", help="a run or checkpoint (default: the shipped agent)")
    p.add_argument("--levels", type=int, default=200)
    p.add_argument(
        "--split", default="held-out", help="the levels (START:NUM); checkpoints are chosen on 1001000:200"
    )
    p = sub.add_parser("ship", help="copy a run's checkpoints (default: its last) into the package")
    p.add_argument("name", choices=SPECS)
    p.add_argument("run")
    p.add_argument(
        "--steps", type=int, nargs="*", default=[], help="the checkpoints' steps (the last: proclab.load's)"
    )
    args = parser.parse_args()
    if args.command == "train":
        train(args.name, args.runs, args.seed)
    elif args.command == "check":
        check(args.name, args.run or f"{SPECS[args.name].game}/small", args.levels, args.split)
    else:
        ship(args.name, args.run, args.steps)
    assert set(BUNDLED) == {f"{s.game}/small" for s in SPECS.values()}


if __name__ == "__main__":
    main()
