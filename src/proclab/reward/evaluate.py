"""``proclab trex evaluate``: the length control for trained reward models, on any demos.

For each reward model, the predicted return (the summed per-frame reward) of every demo of one
split (default: the held-out-level test demos) is set against the true return and the length:
Spearman, partial Spearman given length and Spearman within length bins, each with a bootstrap
CI over demos, beside the +1/step baseline on the same demos (:mod:`proclab.reward.control`).
Demos are read and scored one at a time, so a store of any size fits in memory. The same
statistics are columns of every ``trex train``/``trex grid`` summary row; this command measures
them again on other demos (another game, another split), with other bins or more resamples.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro
from rich.progress import Progress

from proclab.errors import ProclabError
from proclab.io.arguments import DATA, REWARD_MODELS
from proclab.io.files import write_json
from proclab.io.run_dirs import read_run_config
from proclab.reward.control import length_control
from proclab.reward.demo_reader import demo_table, open_store
from proclab.reward.nets import load_reward_model, predict_rewards
from proclab.run.runtime import Runtime, RuntimeConfig


@dataclass(frozen=True)
class EvaluateArgs(RuntimeConfig):
    """Does a learned reward rank demos of equal length by their return? Partial and binned Spearman. The
    predictions are computed with the runtime flags: to measure again what a 'trex train' summary row says,
    give the run's --precision (its config.json holds it; --preset parity runs: fp32)."""

    reward_model: Annotated[tuple[Path, ...], REWARD_MODELS]
    """Reward models: 'proclab trex train' run or checkpoint directories; several: one report each."""
    data: Annotated[Path | None, DATA] = None
    """Demo store (default: the one the first reward model was trained on)."""
    split: str = "test"
    """Demos of this split: test (held-out levels) or train."""
    length_bins: int = 10
    """Equal-count length bins for the binned Spearman."""
    min_bin: int = 5
    """Bins with fewer demos are left out of the binned Spearman."""
    bootstrap: int = 1000
    """Bootstrap resamples of the demos for the 95% CIs (0: none)."""
    seed: int = 0
    """Seed of the bootstrap resamples."""
    out: Path | None = None
    """Also write the reports as JSON here."""


def demo_predictions(net, store, rows: np.ndarray, label: str, runtime: Runtime) -> np.ndarray:
    """Predicted return of each demo at store ``rows``, reading one demo at a time, computed on ``runtime``."""
    out = np.empty(len(rows))
    with Progress(transient=True) as bar:
        task = bar.add_task(label, total=len(rows))
        for i, row in enumerate(rows):
            frames = store.read(int(row), ["obs"])["obs"]
            out[i] = predict_rewards(net, frames, runtime).astype(np.float64).sum()
            bar.advance(task)
    return out


def evaluate_model(args: EvaluateArgs, path: Path, runtime: Runtime) -> dict:
    """The control report of one reward model on ``args``'s demos."""
    net, ckpt = load_reward_model(path)
    net = runtime.prepare(net)
    demos_path = args.data or Path(read_run_config(ckpt.path.parents[1])["demos"])
    store = open_store(demos_path)
    game, table = demo_table(store, ckpt.meta.get("game"), ckpt.meta.get("mode"))
    rows = np.flatnonzero(table["split"] == args.split)
    if len(rows) < 3:
        raise ProclabError(
            f"{str(demos_path)!r} has {len(rows)} {game} {args.split} demos; the control needs at least 3"
        )
    predicted = demo_predictions(net, store, table["index"][rows], f"scoring {len(rows)} demos", runtime)
    report = length_control(
        predicted,
        table["return"][rows].astype(np.float64),
        table["length"][rows].astype(np.float64),
        args.length_bins,
        args.min_bin,
        args.bootstrap,
        args.seed,
    )
    return {
        "reward_model": str(ckpt.path),
        "demos": str(demos_path),
        "game": game,
        "split": args.split,
        **report,
    }


def format_report(r: dict) -> str:
    def ci(key: str) -> str:
        return f"{r[key]:+.3f} [{r[key + '_lo']:+.3f}, {r[key + '_hi']:+.3f}]"

    return "\n".join(
        [
            f"{r['reward_model']}: {r['control_demos']} {r['game']} {r['split']} demos, 95% bootstrap CIs",
            f"  Spearman (predicted vs true return)      {ci('spearman')}",
            f"  +1/step baseline (length vs return)      {ci('baseline_spearman')}",
            f"  Spearman minus baseline (paired)         {ci('spearman_gain')}",
            f"  partial Spearman given length            {ci('partial_spearman')}",
            f"  Spearman within {r['length_bins']} length bins          {ci('binned_spearman')}",
            f"  baseline within the same bins            {ci('baseline_binned_spearman')}",
        ]
    )


def main(argv: list[str], prog: str = "proclab trex evaluate") -> None:
    args = tyro.cli(EvaluateArgs, args=argv, prog=prog)
    if args.split not in ("train", "test"):
        raise ProclabError(f"--split must be train or test, not {args.split!r}")
    if args.length_bins < 1 or args.min_bin < 2 or args.bootstrap < 0:
        raise ProclabError("need --length-bins >= 1, --min-bin >= 2 and --bootstrap >= 0")
    if args.out is not None and args.out.exists():
        raise ProclabError(f"{str(args.out)!r} exists; give another --out (reports are never overwritten)")
    rt = args.runtime()
    reports = []
    for path in args.reward_model:
        reports.append(evaluate_model(args, path, rt))
        print(format_report(reports[-1]))
    if args.out is not None:
        print(f"reports: {write_json(args.out, reports, 'T-REX control report')}")
