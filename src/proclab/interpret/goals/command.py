"""``proclab analyze decision-square``: play a maze agent on many levels and ask, cheese or corner?

Parse -> call -> write: :func:`proclab.interpret.goals.play.play_mazes` plays ``--episodes`` episodes of
``--levels`` in batches (``--keep-batches DIR`` keeps each batch there and resumes from them),
:func:`proclab.interpret.goals.decision.decision_square` counts and fits, and this command writes
``ANALYSIS/decision-square/summary.json``, ``mazes.npz`` (every maze's distances and the steps at which it
reached each goal) and ``rates.png`` (P(cheese) and P(corner) against the cheese's distance from the corner).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from proclab.errors import ProclabError
from proclab.interpret.goals.decision import DecisionSquare, DecisionSquareSettings, decision_square
from proclab.interpret.goals.play import play_mazes
from proclab.interpret.workspace.command import AGENT, AnalysisArgs
from proclab.interpret.workspace.folder import Workspace
from proclab.io.files import save_figure, save_npz
from proclab.io.progress import phases
from proclab.io.results import jsonable
from proclab.models.loading import load

NAME = "decision-square"


@dataclass(frozen=True)
class DecisionSquareArgs(AnalysisArgs):
    """Decision square: cheese or top-right corner, by the cheese's distance and at the square where paths part."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"episodes": 64, "bootstrap": 100}}

    agent: AGENT = None
    """Maze agent played: a proclab run or checkpoint directory, an agent file, or a published agent's name
    (maze/goal-misgeneralization)."""
    seed: int = 0
    """Seed of the levels drawn from --levels and of the sampled actions (batch k plays with seed + k), and of
    the bootstrap and the folds."""
    precision: str = field(default="auto", kw_only=True)
    """The agent's arithmetic while it plays: fp32, bf16 (autocast) or auto (bf16 where the hardware computes
    it natively). The numbers of docs/misgeneralization.md were played in fp32 (--precision fp32)."""
    levels: str = "2000000:1000000"
    """Split the mazes are drawn from (START:NUM; each episode's level drawn by procgen; repeats counted once)."""
    episodes: int = 3200
    """Episodes played (whole batches)."""
    batch: int = 32
    """Episodes played together (one rollout; its frames are dropped once read)."""
    greedy: bool = False
    """Most likely action instead of sampled ones (Mini et al. sampled)."""
    horizon: int = 256
    """Steps of an episode that count (Mini et al.: 256; 0: the whole episode)."""
    bins: str = "0,1,3,5,7,9,12,inf"
    """Edges of the bins of the cheese's Euclidean distance (cells) from the top-right cell."""
    region: int = 5
    """Width of the top-right region."""
    exclude_region: bool = True
    """Leave the mazes whose cheese lies in the top-right region out of the regression (Mini et al.)."""
    penalty: str = "l1"
    """l1 (Mini et al.'s liblinear fit at --c) or none (maximum likelihood)."""
    c: float = 1.0
    """Inverse strength of the L1 penalty."""
    bootstrap: int = 500
    """Resamples of mazes for the coefficients' intervals."""
    folds: int = 10
    """Folds of the cross-validated accuracy."""
    keep_batches: Path | None = None
    """Keep every played batch in this folder and resume from the batches already there."""


def settings_of(args: DecisionSquareArgs) -> DecisionSquareSettings:
    try:
        bins = tuple(float(v) for v in args.bins.split(","))
    except ValueError:
        raise ProclabError(
            f"--bins {args.bins!r}: expected distances separated by commas, e.g. 0,2,4,inf"
        ) from None
    settings = DecisionSquareSettings(
        horizon=args.horizon or None, bins=bins, region=args.region, exclude_region=args.exclude_region,
        penalty=args.penalty, c=args.c, bootstrap=args.bootstrap, folds=args.folds, seed=args.seed,
    )  # fmt: skip
    settings.check()
    return settings


def run_decision_square(args: DecisionSquareArgs) -> Path:
    start = time.perf_counter()
    args.require_positive("episodes", "batch")
    settings = settings_of(args)
    if args.agent is None:
        raise ProclabError("analyze decision-square needs the agent: pass --agent AGENT")
    ws = Workspace.open(args.out)
    agent = load(args.agent, device=args.device, precision=args.precision)
    if tuple(agent.env_config.games()) != ("maze",):
        raise ProclabError(
            f"--agent plays {', '.join(agent.env_config.games())}: the decision square is maze's"
        )
    out = ws.command_dir(NAME)
    with phases(3, NAME) as ph:
        with ph.phase("playing"):
            episodes = play_mazes(
                agent, args.levels, args.episodes, batch=args.batch, seed=args.seed, greedy=args.greedy,
                region=args.region, folder=args.keep_batches, progress=ph.fraction,
            )  # fmt: skip
        result = decision_square(episodes, settings=settings)
    save_npz(out / "mazes.npz", "mazes", **result.episodes)
    save_figure(result.plot(), out / "rates.png", dpi=120)
    summary = {
        "agent": str(args.agent),
        "levels": args.levels,
        "episodes_played": len(episodes),
        "greedy": args.greedy,
        "settings": dataclasses.asdict(settings),
        **{k: v for k, v in jsonable(result).items() if k != "episodes"},
    }
    _print(result)
    return ws.finish(NAME, args, [out / "mazes.npz", out / "rates.png"], summary, start)


def _print(result: DecisionSquare) -> None:
    for b in result.bins:
        c, k = b["cheese"], b["corner"]
        if b["mazes"]:
            print(
                f"distance {b['distance']:>10}: {b['mazes']:5d} mazes, P(cheese) {c['share']:.3f} "
                f"[{c['interval'][0]:.3f}, {c['interval'][1]:.3f}], P(corner) {k['share']:.3f} "
                f"[{k['interval'][0]:.3f}, {k['interval'][1]:.3f}]"
            )
    d = result.decision
    share = d["p_cheese"]["share"]
    print(
        f"decision square in {d['with_decision_square']} of {result.mazes} mazes, {d['mazes']} kept"
        + ("" if share is None else f"; P(cheese) there {share:.3f}")
    )
    for outcome, models in result.regressions.items():
        for name, r in models.items():
            if name == "skipped":
                print(f"{outcome}: no regression ({r})")
            else:
                print(
                    f"{outcome} ~ {name}: accuracy {r['accuracy']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}] "
                    f"vs base rate {r['base_rate']:.3f} (McNemar p {r['p_mcnemar']:.3g}, Holm {r['p_holm']:.3g})"
                )
