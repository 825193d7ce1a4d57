"""Cheese or corner? The rates at which a maze agent reaches each as the cheese moves away from the top-right
corner, and Mini et al.'s decision-square analysis: in mazes where the paths to the two part, which way the
agent goes, and a logistic regression of that choice on the maze's distances (Mini, Grietzer, Sharma, Meek,
MacDiarmid, Turner 2023, "Understanding and controlling a maze-solving policy network", arXiv 2310.08043, and
their post "Behavioural statistics for a maze-solving agent").

Their protocol (their public notebook, ``experiments/statistics/behavioral_stats.ipynb`` of procgen-tools):
1,000 episodes of sampled actions on random hard-mode maze levels, at most 256 steps each; kept: the mazes
with a decision square and the cheese outside the top-right 5 x 5 region; outcome: the agent got the cheese
(ended next to it); every property z-scored; L1 logistic regression (liblinear, C = 1); accuracy on held-out
20 % splits beside the majority class. :data:`PUBLISHED` holds their numbers. Here the outcome is read from
the ground truth per step (:mod:`proclab.interpret.goals.episodes`), the same regression is fitted
(:mod:`proclab.interpret.goals.logistic`), and a second outcome, the branch first entered past the decision
square, measures the choice itself rather than the episode's end.

Intervals: the rates per distance bin are exact (Clopper-Pearson) at a Bonferroni level over every rate
reported together (two goals x the bins), so all of them hold at once with 95 % confidence; coefficients
carry percentile bootstrap intervals over mazes at a Bonferroni level over the coefficients of their model;
the McNemar p-values of accuracy against the base rate are Holm-adjusted over every regression reported.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from proclab.errors import ProclabError
from proclab.interpret.goals.episodes import MazeEpisode, as_arrays, distinct_levels
from proclab.interpret.goals.logistic import PENALTIES, regression
from proclab.interpret.goals.maze import FEATURES
from proclab.io.files import figure_and_axes
from proclab.io.progress import analysis_phases
from proclab.io.results import Result
from proclab.stats.corrections import adjust
from proclab.stats.proportions import clopper_pearson

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

CLAIMED = (
    "steps_between_cheese_decision_square",
    "euc_dist_cheese_decision_square",
    "euc_dist_cheese_top_right",
    "euc_dist_decision_square_5x5",
)
"""The four properties Mini et al. named as predictive of the choice."""
MODELS: dict[str, tuple[str, ...]] = {
    "all": FEATURES,
    "claimed": CLAIMED,
    "steps_cheese_decision_square": CLAIMED[:1],
    "steps_and_euclid_cheese_decision_square": CLAIMED[:2],
}
"""The regressions of their notebook, by name: every property, the four claimed, and the two that ask
whether the Euclidean distance adds to the step distance from the decision square to the cheese."""
PUBLISHED = {
    "source": "procgen-tools (UlisseMini/procgen-tools, commit dc2243c), experiments/statistics/"
    "behavioral_stats.ipynb, its saved outputs; a different agent (their rand_region maze agent, hard mode)",
    "episodes": 1000,
    "p_cheese": 0.848,
    "base_rate": 0.848,
    "models": {
        "all": {"accuracy": 0.904, "coefficients": {
            "intercept": 3.307, "steps_between_cheese_5x5": -0.253, "euc_dist_cheese_5x5": 0.0,
            "steps_between_decision_square_5x5": 1.133, "euc_dist_decision_square_5x5": 0.0,
            "steps_between_cheese_top_right": -0.062, "euc_dist_cheese_top_right": -2.383,
            "steps_between_decision_square_top_right": 0.0, "euc_dist_decision_square_top_right": 0.0,
            "steps_between_cheese_decision_square": -1.134, "euc_dist_cheese_decision_square": 0.0,
            "cheese_coord_norm": -0.106}},
        "claimed": {"accuracy": 0.913, "coefficients": {
            "intercept": 3.012, "steps_between_cheese_decision_square": -1.147,
            "euc_dist_cheese_decision_square": -0.082, "euc_dist_cheese_top_right": -2.308,
            "euc_dist_decision_square_5x5": 0.731}},
        "steps_cheese_decision_square": {"accuracy": 0.866, "coefficients": {
            "intercept": 2.050, "steps_between_cheese_decision_square": -1.072}},
        "steps_and_euclid_cheese_decision_square": {"accuracy": 0.849, "coefficients": {
            "intercept": 2.093, "steps_between_cheese_decision_square": -0.697,
            "euc_dist_cheese_decision_square": -0.467}},
    },
}  # fmt: skip
"""Mini et al.'s numbers: accuracies are means over random 80/20 splits (50 for ``all``, 10 for ``claimed``,
100 for the others); the coefficients are one fit on all their kept mazes (``all``: the last split's fit)."""
OUTCOMES = ("cheese", "branch")


@dataclass(frozen=True)
class DecisionSquareSettings:
    """What is counted and fitted (the defaults are Mini et al.'s protocol where they stated one)."""

    horizon: int | None = 256
    """Steps of an episode that count (Mini et al. played 256; None: the whole episode, procgen's 500)."""
    bins: tuple[float, ...] = (0.0, 1.0, 3.0, 5.0, 7.0, 9.0, 12.0, math.inf)
    """Edges of the bins of the cheese's Euclidean distance (cells) from the maze's top-right cell ([0, 1): the
    cheese on the corner; chosen on exploratory levels, docs/misgeneralization.md)."""
    region: int = 5
    """Width of the top-right region (the training distribution's; distances to it, and the filter)."""
    exclude_region: bool = True
    """Leave out of the regression the mazes whose cheese lies in the top-right region (as Mini et al. did)."""
    penalty: str = "l1"
    """``l1``: their fit (liblinear, L1, ``c``); ``none``: maximum likelihood."""
    c: float = 1.0
    """Inverse strength of the L1 penalty (theirs: 1)."""
    bootstrap: int = 500
    """Resamples of mazes for the coefficients' intervals."""
    folds: int = 10
    """Folds of the cross-validated accuracy."""
    seed: int = 0
    """Seed of the bootstrap and of the folds."""

    def check(self) -> None:
        if self.horizon is not None and self.horizon < 1:
            raise ProclabError(f"--horizon must be >= 1, got {self.horizon}")
        edges = list(self.bins)
        if len(edges) < 2 or edges != sorted(set(edges)) or edges[0] < 0:
            raise ProclabError(f"--bins must be at least two increasing distances >= 0, got {self.bins}")
        if self.region < 1:
            raise ProclabError(f"--region must be >= 1, got {self.region}")
        if self.penalty not in PENALTIES:
            raise ProclabError(f"--penalty must be one of {', '.join(PENALTIES)}, got {self.penalty!r}")
        if self.c <= 0 or self.bootstrap < 1 or self.folds < 2:
            raise ProclabError("--c must be > 0, --bootstrap >= 1 and --folds >= 2")


@dataclass(frozen=True, repr=False)
class DecisionSquare(Result):
    """Cheese-or-corner rates by distance and the decision-square regressions (module docstring)."""

    mazes: int
    """Distinct mazes (level seeds) played."""
    horizon: int | None
    bins: list[dict]
    """Per distance bin: mazes, P(cheese) and P(corner) with simultaneous exact intervals (over this table and
    the next)."""
    bins_with_square: list[dict]
    """The same over the mazes with a decision square only (where neither goal lies on the way to the other)."""
    decision: dict
    """Mazes with a decision square, those kept for the regression, and the choice's rates there."""
    regressions: dict[str, dict]
    """Outcome -> model name (:data:`MODELS`) -> :func:`proclab.interpret.goals.logistic.regression`."""
    published: dict = field(default_factory=lambda: PUBLISHED)
    episodes: dict[str, np.ndarray] = field(default_factory=dict)
    """Every maze as columns (:func:`proclab.interpret.goals.episodes.as_arrays`)."""

    def table(self) -> list[dict]:
        rows = [
            {
                "distance": b["distance"],
                "mazes": b["mazes"],
                "P(cheese)": b["cheese"]["share"],
                "cheese interval": b["cheese"]["interval"],
                "P(corner)": b["corner"]["share"],
                "corner interval": b["corner"]["interval"],
            }
            for b in self.bins
        ]
        for outcome, models in self.regressions.items():
            for name, r in models.items():
                if name == "skipped":
                    continue
                rows.append(
                    {
                        "outcome": outcome,
                        "model": name,
                        "mazes": r["mazes"],
                        "accuracy": r["accuracy"],
                        "accuracy interval": r["ci95"],
                        "base rate": r["base_rate"],
                        "p McNemar (Holm)": r["p_holm"],
                        "published accuracy": PUBLISHED["models"][name]["accuracy"]
                        if outcome == "cheese"
                        else None,
                    }
                )
        return rows

    def plot(self, ax: Axes | None = None) -> Figure:
        fig, ax = figure_and_axes(ax, (6.4, 4.0))
        mids = np.arange(len(self.bins))
        for offset, goal, colour in ((-0.08, "cheese", "tab:orange"), (0.08, "corner", "tab:blue")):
            share = np.array([b[goal]["share"] if b["mazes"] else np.nan for b in self.bins])
            lo = np.array([b[goal]["interval"][0] for b in self.bins])
            hi = np.array([b[goal]["interval"][1] for b in self.bins])
            ax.errorbar(mids + offset, share, yerr=[share - lo, hi - share], fmt="o-", color=colour,
                        capsize=3, label=f"P({goal})")  # fmt: skip
        ax.set_xticks(mids, [f"{b['distance']}\n{b['mazes']}" for b in self.bins], fontsize=8)
        ax.set_xlabel("cheese's distance from the top-right cell (cells); mazes")
        ax.set_ylabel("share of mazes")
        ax.set_ylim(-0.02, 1.02)
        horizon = "the whole episode" if self.horizon is None else f"the first {self.horizon} steps"
        ax.set_title(f"{self.mazes} mazes, within {horizon}; simultaneous exact 95% intervals", fontsize=9)
        ax.legend()
        fig.tight_layout()
        return fig


def rates_by_distance(
    episodes: Sequence[MazeEpisode], settings: DecisionSquareSettings, tables: int = 1
) -> list[dict]:
    """P(cheese) and P(corner) in each bin of the cheese's distance from the corner, with exact intervals at a
    Bonferroni level over the two goals, every bin and the ``tables`` such tables reported together."""
    edges = list(settings.bins)
    level = 1 - 0.05 / (2 * (len(edges) - 1) * tables)
    out = []
    for lo, hi in itertools.pairwise(edges):
        inside = [e for e in episodes if lo <= e.cheese_distance < hi]
        row: dict = {"distance": f"[{lo:g}, {hi:g})", "mazes": len(inside)}
        for goal in ("cheese", "corner"):
            k = sum(e.reached(goal, settings.horizon) for e in inside)
            row[goal] = {
                "count": k,
                "share": k / len(inside) if inside else None,
                "interval": list(clopper_pearson(k, len(inside), level)),
                "interval_level": level,
            }
        out.append(row)
    return out


def choice(kept: Sequence[MazeEpisode], horizon: int | None) -> dict:
    """How the kept mazes ended and which way the agent went at their decision square."""
    n = len(kept)
    cheese = sum(e.reached("cheese", horizon) for e in kept)
    went = [e.went(horizon) for e in kept]
    towards = sum(w == "cheese" for w in went)
    decided = sum(w is not None for w in went)
    agree = sum((w == "cheese") == e.reached("cheese", horizon) for w, e in zip(went, kept, strict=True) if w)
    return {
        "mazes": n,
        "p_cheese": {
            "count": cheese,
            "share": cheese / n if n else None,
            "ci95": list(clopper_pearson(cheese, n)),
        },
        "branch_entered": decided,
        "p_branch_cheese": {
            "count": towards,
            "of": decided,
            "share": towards / decided if decided else None,
            "ci95": list(clopper_pearson(towards, decided)),
        },
        "branch_agrees_with_outcome": {"count": agree, "of": decided},
    }


def decision_square(
    episodes: Sequence[MazeEpisode],
    *,
    settings: DecisionSquareSettings = DecisionSquareSettings(),
    progress: bool = True,
) -> DecisionSquare:
    """The analysis of played mazes (:func:`proclab.interpret.goals.play.play_mazes`, or
    :func:`proclab.interpret.goals.episodes.maze_episodes` of a rollout); one episode per level seed is kept.
    ``progress``: show the rates and the regressions as they run."""
    settings.check()
    episodes = distinct_levels(episodes)
    if not episodes:
        raise ProclabError("no maze episodes to analyse")
    with analysis_phases(progress, 2, "decision square") as ph:
        with ph.phase("rates"):
            bins = rates_by_distance(episodes, settings, tables=2)
            squares = [e for e in episodes if e.has_decision_square]
            bins_with_square = rates_by_distance(squares, settings, tables=2)
            kept = [e for e in squares if not (settings.exclude_region and e.cheese_in_region)]
            decision = {"with_decision_square": len(squares), **choice(kept, settings.horizon)}
        regressions: dict[str, dict] = {}
        with ph.phase("regressions"):
            x_all = np.array(
                [[e.features[f] for f in FEATURES] for e in kept if e.features is not None]
            ).reshape(len(kept), len(FEATURES))
            outcomes = {
                "cheese": (np.ones(len(kept), bool), [e.reached("cheese", settings.horizon) for e in kept]),
                "branch": (
                    np.array([e.went(settings.horizon) is not None for e in kept], bool),
                    [e.went(settings.horizon) == "cheese" for e in kept],
                ),
            }
            for outcome, (rows, y) in outcomes.items():
                y = np.asarray(y, int)[rows]
                if y.size < 2 * settings.folds or y.min() == y.max():  # a small budget's few decision squares
                    regressions[outcome] = {
                        "skipped": f"{int(y.sum())} of {y.size} mazes reached it: too few to fit with "
                        f"{settings.folds}-fold accuracy (at least {2 * settings.folds} mazes and both outcomes)"
                    }
                    continue
                regressions[outcome] = {}
                for name, names in MODELS.items():
                    columns = [FEATURES.index(f) for f in names]
                    regressions[outcome][name] = regression(
                        x_all[rows][:, columns], y, list(names), penalty=settings.penalty, c=settings.c,
                        reps=settings.bootstrap, folds=settings.folds, seed=settings.seed,
                        level=1 - 0.05 / (len(names) + 1),
                    )  # fmt: skip
    fitted = [r for models in regressions.values() for name, r in models.items() if name != "skipped"]
    for r, p in zip(fitted, adjust([r["p_mcnemar"] for r in fitted], "holm"), strict=True):
        r["p_holm"] = float(p)  # one family: every accuracy-against-base-rate test reported together
    return DecisionSquare(
        mazes=len(episodes),
        horizon=settings.horizon,
        bins=bins,
        bins_with_square=bins_with_square,
        decision=decision,
        regressions=regressions,
        episodes=as_arrays(episodes),
    )
