"""The length control for trained reward models, on any demos (:func:`evaluate_trex`, ``proclab trex evaluate``).

For each reward model, the predicted return (the summed per-frame reward) of every demo of one
split (default: the held-out-level test demos) is set against the true return and the length:
Spearman, partial Spearman given length (also within the checkpoint that played each demo) and
Spearman within length bins, each with a bootstrap CI over demos, beside the +1/step baseline on the
same demos, with paired intervals of the differences (:mod:`proclab.reward.control`).
Demos are read and scored one at a time, so a store of any size fits in memory. The same
statistics are columns of every ``trex train``/``trex grid`` summary row; :func:`evaluate_trex` measures
them again on other demos (another game, another split), with other bins or more resamples.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from proclab.errors import ProclabError
from proclab.io.files import subplots
from proclab.io.progress import Phases, analysis_phases
from proclab.io.results import Result
from proclab.io.run_dirs import read_run_config
from proclab.reward.control import length_control
from proclab.reward.demo_reader import demo_table, open_store
from proclab.reward.nets import RewardModel, as_reward_model, predict_rewards
from proclab.run.runtime import Runtime
from proclab.store import EpisodeStore

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class TrexEvaluation(Result):
    """Does a learned reward rank demos by their return, beyond what their length says? (module docstring)

    Each statistic has its 95 % bootstrap interval (``_lo``, ``_hi``; NaN without resamples):
    ``spearman`` (predicted vs true return), ``partial_spearman`` (given length), ``binned_spearman``
    (within ``length_bins`` equal-count length bins), the +1/step baseline's ``baseline_spearman`` and
    ``baseline_binned_spearman``, ``spearman_gain`` and ``binned_gain`` (the model's Spearman and binned
    Spearman minus the baseline's, paired), and ``checkpoint_partial_spearman`` (partial Spearman given
    length within the checkpoint that played each demo). ``predicted``, ``true``, ``length`` and
    ``checkpoint`` are the per-demo numbers they come from."""

    reward_model: str
    demos: str
    game: str
    split: str
    spearman: float
    spearman_lo: float
    spearman_hi: float
    partial_spearman: float
    partial_spearman_lo: float
    partial_spearman_hi: float
    binned_spearman: float
    binned_spearman_lo: float
    binned_spearman_hi: float
    baseline_spearman: float
    baseline_spearman_lo: float
    baseline_spearman_hi: float
    baseline_binned_spearman: float
    baseline_binned_spearman_lo: float
    baseline_binned_spearman_hi: float
    spearman_gain: float
    spearman_gain_lo: float
    spearman_gain_hi: float
    binned_gain: float
    binned_gain_lo: float
    binned_gain_hi: float
    checkpoint_partial_spearman: float
    checkpoint_partial_spearman_lo: float
    checkpoint_partial_spearman_hi: float
    length_bins: int
    control_demos: int
    predicted: np.ndarray
    """``(N,)``: each demo's predicted return (its per-frame rewards summed)."""
    true: np.ndarray
    """``(N,)``: its true return."""
    length: np.ndarray
    """``(N,)``: its length (the +1/step baseline's predicted return)."""
    checkpoint: np.ndarray
    """``(N,)``: the checkpoint that played it (its path, a string)."""

    def report(self) -> dict:
        """The numbers without the per-demo arrays, as ``trex evaluate --out`` writes them (NaN kept)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in PER_DEMO}

    def table(self) -> list[dict]:
        """One row per statistic: its value and 95 % interval."""
        return [
            {
                "statistic": label,
                "value": getattr(self, key),
                "ci95": (getattr(self, f"{key}_lo"), getattr(self, f"{key}_hi")),
            }
            for key, label in STAT_LABELS.items()
        ]

    def plot(self, ax: Axes | None = None) -> Figure:
        """Left: predicted against true return per demo, coloured by length. Right: each statistic with its
        95 % interval, the +1/step baseline's beside the model's."""
        if ax is not None:
            raise ProclabError("TrexEvaluation.plot draws two panels of its own; call it without ax")
        fig, (left, right) = subplots(1, 2, figsize=(10, 3.8))
        dots = left.scatter(self.true, self.predicted, c=self.length, s=12, cmap="viridis")
        fig.colorbar(dots, ax=left, label="demo length")
        left.set_xlabel("true return")
        left.set_ylabel("predicted return")
        left.set_title(f"{self.control_demos} {self.game} {self.split} demos")
        keys = list(STAT_LABELS)
        values = np.array([getattr(self, k) for k in keys])
        bounds = np.array([[getattr(self, f"{k}_lo"), getattr(self, f"{k}_hi")] for k in keys])
        errors = np.nan_to_num(np.abs(bounds.T - values))  # no interval without resamples
        colours = ["C1" if k.startswith("baseline") else "C0" for k in keys]
        right.barh(range(len(keys)), values, xerr=errors, color=colours, capsize=3)
        right.set_yticks(range(len(keys)), [STAT_LABELS[k] for k in keys], fontsize=8)
        right.invert_yaxis()
        right.axvline(0, color="black", lw=0.8)
        reach = np.nanmax(np.abs(np.concatenate([values, bounds.ravel()])), initial=1.0)
        right.set_xlim(-reach, reach)  # a gain, a difference of correlations, may pass 1
        right.set_title("learned reward (blue), +1/step baseline (orange)")
        fig.tight_layout()
        return fig


PER_DEMO = ("predicted", "true", "length", "checkpoint")
STAT_LABELS = {
    "spearman": "Spearman",
    "baseline_spearman": "baseline Spearman",
    "partial_spearman": "partial Spearman given length",
    "binned_spearman": "Spearman within length bins",
    "baseline_binned_spearman": "baseline within length bins",
    "spearman_gain": "Spearman minus baseline",
    "binned_gain": "within bins minus baseline",
    "checkpoint_partial_spearman": "partial given length within checkpoint",
}
"""The statistics of :meth:`TrexEvaluation.table`, in reading order."""


@dataclass(frozen=True)
class TrexEvaluationSettings:
    """What :func:`evaluate_trex` measures (the options of ``proclab trex evaluate``, same names and meanings)."""

    split: str = "test"
    """Demos of this split: test (held-out levels) or train."""
    length_bins: int = 10
    """Equal-count length bins for the binned Spearman."""
    min_bin: int = 5
    """Bins with fewer demos are left out of the binned Spearman."""
    bootstrap: int = 1000
    """Bootstrap resamples of the demos for the 95 % CIs (0: none)."""
    seed: int = 0
    """Seed of the bootstrap resamples."""

    def check(self) -> None:
        if self.split not in ("train", "test"):
            raise ProclabError(f"--split must be train or test, not {self.split!r}")
        if self.length_bins < 1 or self.min_bin < 2 or self.bootstrap < 0:
            raise ProclabError("need --length-bins >= 1, --min-bin >= 2 and --bootstrap >= 0")


def demo_predictions(net, store, rows: np.ndarray, runtime: Runtime, ph: Phases) -> np.ndarray:
    """Predicted return of each demo at store ``rows``, reading one demo at a time, computed on ``runtime``
    (the share scored shown on ``ph``)."""
    out = np.empty(len(rows))
    count = ph.counter(len(rows))
    for i, row in enumerate(rows):
        frames = store.read(int(row), ["obs"])["obs"]
        out[i] = predict_rewards(net, frames, runtime).astype(np.float64).sum()
        count()
    return out


def evaluate_trex(
    reward_model: RewardModel | str | Path,
    *,
    demos: EpisodeStore | str | Path | None = None,
    settings: TrexEvaluationSettings = TrexEvaluationSettings(),
    progress: bool = True,
) -> TrexEvaluation:
    """The length control of ``reward_model`` on the ``settings.split`` demos of ``demos`` (default: the store it
    was trained on): each demo's predicted return against its true return and its length (module docstring),
    computed on the reward model's runtime. ``progress``: show the share of demos scored."""
    settings.check()
    split = settings.split
    model = as_reward_model(reward_model)
    if isinstance(demos, EpisodeStore):
        demos = demos.path
    demos_path = demos or Path(read_run_config(model.path.parents[1])["demos"])
    store = open_store(demos_path)
    game, table = demo_table(store, model.game, model.checkpoint.meta.get("mode"))
    rows = np.flatnonzero(table["split"] == split)
    if len(rows) < 3:
        raise ProclabError(
            f"{str(demos_path)!r} has {len(rows)} {game} {split} demos; the control needs at least 3"
        )
    with analysis_phases(progress, 1, "trex evaluate") as ph, ph.phase(f"scoring {len(rows)} demos"):
        predicted = demo_predictions(model.net, store, table["index"][rows], model.runtime, ph)
    true, length = table["return"][rows].astype(np.float64), table["length"][rows].astype(np.float64)
    checkpoint = table["checkpoint"][rows]
    s = settings
    report = length_control(
        predicted, true, length, s.length_bins, s.min_bin, s.bootstrap, s.seed, checkpoint
    )
    return TrexEvaluation(
        reward_model=str(model.path),
        demos=str(demos_path),
        game=game,
        split=split,
        **report,
        predicted=predicted,
        true=true,
        length=length,
        checkpoint=checkpoint.astype(str),  # the store's strings, as an array saved without pickle
    )
