"""``proclab trex evaluate``: :func:`~proclab.reward.evaluation.evaluate_trex` of each reward model given,
printed and written as one JSON list of reports (:meth:`~proclab.reward.evaluation.TrexEvaluation.report`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated

import tyro

from proclab.errors import ProclabError
from proclab.io.arguments import DATA, REWARD_MODELS
from proclab.io.files import write_json
from proclab.reward.evaluation import TrexEvaluationSettings, evaluate_trex
from proclab.reward.nets import RewardModel
from proclab.run.runtime import RuntimeConfig


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
            f"  within bins minus baseline (paired)      {ci('binned_gain')}",
            f"  partial given length within checkpoint   {ci('checkpoint_partial_spearman')}",
        ]
    )


def main(argv: list[str], prog: str = "proclab trex evaluate") -> None:
    args = tyro.cli(EvaluateArgs, args=argv, prog=prog)
    if args.out is not None and args.out.exists():
        raise ProclabError(f"{str(args.out)!r} exists; give another --out (reports are never overwritten)")
    rt = args.runtime()
    settings = TrexEvaluationSettings(
        **{f.name: getattr(args, f.name) for f in fields(TrexEvaluationSettings)}
    )
    reports = []
    for path in args.reward_model:
        evaluation = evaluate_trex(RewardModel.load(path, runtime=rt), demos=args.data, settings=settings)
        reports.append(evaluation.report())
        print(format_report(reports[-1]))
    if args.out is not None:
        print(f"reports: {write_json(args.out, reports, 'T-REX control report')}")
