"""``proclab analyze steer``: add a contrastive vector at a hook during real play; retarget by channels.

Parse -> call -> write: :func:`proclab.interpret.steering.steer.steer` plays the agent (any agent in memory
there); this command loads ``--agent`` and writes ``ANALYSIS/steer/summary.json`` and ``vector.pt``.

1. **Vector.** On ``--vector-levels`` (default: training levels) each level's first state with the
   ``--entity`` and without it (:mod:`proclab.interpret.steering.vectors`) give the steering vector at
   ``--hook``: the mean activation difference, with minus without.
2. **Coefficients.** On ``--levels`` held-out levels of ``--split``, the agent plays once per
   coefficient (``--coefficients``, default ``-2,-1,0,1,2``) with ``coefficient * vector`` added at the
   hook at every step (coefficient 0 is the plain agent: adding zero is exact). All variants of a
   level start from the same game state (:mod:`proclab.interpret.interventions.batched_play`), so every
   outcome is compared with coefficient 0 *paired by level*: return, level completed (in games whose
   goal ends the level, e.g. maze's cheese: reaching the goal), steps; episode-bootstrap intervals.
3. **Retargeting** (``--channels``, e.g. the channels ``analyze probe --entity`` found tracking the
   entity): per held-out level a target cell (a random ``--target-cell`` cell at least 2 cells from the
   agent's start) is written into those channels at its position in the map, at each channel's largest
   activation on the vector's frames times ``--magnitude``; the control writes the same into as many
   random other channels. Outcome: how often the agent's centre reaches the target cell, each arm against the plain agent and
   the tracking channels against the random ones, paired by level.

Per coefficient, ``reach`` says for each kind of the game's glossary present at the start of some
held-out level how often the agent reached it on those levels (its box within ``--reach-gap`` of one,
:class:`~proclab.interpret.steering.reach.Near`; the goal also by completing the level), paired with
coefficient 0 over the same levels.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import ClassVar

import torch

from proclab.errors import ProclabError
from proclab.interpret.interventions.edit_target import agent_checkpoint
from proclab.interpret.steering.steer import SteerSettings, check_coefficients, steer
from proclab.interpret.workspace.args import AGENT, AnalysisArgs
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.levels.file import read_level_states
from proclab.models.loading import load_agent

NAME = "steer"


@dataclass(frozen=True)
class SteerArgs(AnalysisArgs):
    """Steer: a vector from levels with and without an entity, added at a hook while playing held-out levels."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"levels": 20, "vector_levels": "0:20"}}

    seed: int = 0
    """Seed of the held-out levels drawn from --split, the envs, sampled actions (--no-greedy), the
    retargeting's control channels and target cells, and the bootstrap."""
    precision: str = field(default="auto", kw_only=True)
    """The agent's arithmetic while it plays: fp32, bf16 (autocast) or auto (bf16 where the hardware computes
    it natively). Every coefficient plays at the same precision, so the comparisons stay paired; the vector
    itself is measured in fp32."""
    agent: AGENT = None
    """Agent played: a proclab run or checkpoint directory (default: the folder's, else the one that
    recorded its data)."""
    hook: str = "torso.block1.hook_out"
    """Hook point the vector is added at (any of the agent's)."""
    entity: str | None = None
    """Kind removed to make the contrastive pairs (default: the game's goal, e.g. maze's cheese)."""
    vector_levels: str = "0:200"
    """Levels whose with/without pairs make the vector (START:NUM or a split name; default training levels)."""
    split: str = "test1"
    """Held-out levels played (named split or START:NUM)."""
    levels: int = 200
    """Held-out levels, each played once per coefficient (and per retargeting arm)."""
    levels_from: Path | None = None
    """Play the states of this level-state file as the held-out levels (each once per variant; --levels
    and --split unused): edited levels (proclab level edit) or recorded ones (level export). The vector
    is still built from --vector-levels."""
    coefficients: str = "-2,-1,0,1,2"
    """Coefficients of the vector (0 is the plain agent, the baseline of the paired comparisons)."""
    per_level: bool = False
    """Also steer each held-out level with its own vector (that level with minus without the entity, as
    Mini et al. did; levels without the entity get none)."""
    channels: tuple[int, ...] = ()
    """Retargeting: channels of the hook's map that track the entity (none: no retargeting)."""
    magnitude: float = 1.0
    """Retargeting: the value written, as a multiple of each channel's largest activation on the vector's
    frames (Mini et al. wrote values far above a channel's range)."""
    reach_gap: float = 0.5
    """Per-kind reach: a kind counts as reached on a level when the agent's box came within this many
    world units of one (the touch that ends an episode is never seen, only the approach; the goal is
    also reached when the level is completed)."""
    target_cell: str = "space"
    """Retargeting: the kind of cell a target is drawn from."""
    greedy: bool = True
    """Most likely action (--no-greedy samples with the same noise in every variant of a level)."""
    rows: int = 64
    """Episodes stepped together."""
    bootstrap: int = 2000
    """Bootstrap resamples of the paired CIs."""


def parse_coefficients(text: str) -> tuple[float, ...]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ProclabError(
            f"--coefficients {text!r}: expected numbers separated by commas, e.g. -2,-1,0,1,2"
        ) from None
    return tuple(check_coefficients(values))


def settings_of(args: SteerArgs) -> SteerSettings:
    given = {f.name: getattr(args, f.name) for f in fields(SteerSettings) if f.name != "coefficients"}
    return SteerSettings(**given, coefficients=parse_coefficients(args.coefficients))


def run_steer(args: SteerArgs) -> Path:
    start = time.time()
    settings = settings_of(args)
    ws = Workspace.open(args.out)
    checkpoint = agent_checkpoint(ws, args.agent, "analyze steer")
    ws.require_inputs(checkpoint=checkpoint)
    rt = args.runtime()
    agent, _, _ = load_agent(checkpoint, rt)
    files = read_level_states(args.levels_from) if args.levels_from is not None else None
    out = ws.command_dir(NAME)
    with phases(2 + bool(args.channels) + args.per_level, NAME) as ph:
        result = steer(agent, settings, level_states=files, runtime=rt, phase=ph.phase)
    torch.save(torch.from_numpy(result.vector), out / "vector.pt")
    summary: dict = {
        "hook": result.hook,
        "entity": result.entity,
        "checkpoint": str(checkpoint),
        "game": result.game,
    }
    summary["levels"] = result.levels
    summary["levels_from"] = None if files is None else str(args.levels_from)
    summary["vector"] = result.vector_info
    summary["coefficients"] = result.coefficients
    if result.per_level is not None:
        summary["per_level"] = result.per_level
    if result.retarget is not None:
        summary["retarget"] = result.retarget
    summary["seconds"] = round(time.time() - start, 3)
    write_json_atomic(out / "summary.json", summary)
    _print(summary)
    ws.record_command(
        NAME, asdict(args), [str(out / "summary.json"), str(out / "vector.pt")], time.time() - start
    )
    return ws.final(out)


def _print(summary: dict) -> None:
    rows = [("mean vector", summary["coefficients"])]
    if "per_level" in summary:
        rows.append(("per-level vectors", summary["per_level"]["coefficients"]))
    for label, by_coefficient in rows:
        for c, r in by_coefficient.items():
            lc = r["level_complete"]
            print(
                f"{label}, coefficient {c:>5}: level completed {lc['intervened']:.3f} (change {lc['change']:+.3f} "
                f"[{lc['ci95'][0]:+.3f}, {lc['ci95'][1]:+.3f}]), return change {r['return']['change']:+.3f}"
            )
            for kind, k in r.get("reach", {}).items():
                print(
                    f"    reached {kind} on {k['intervened']:.3f} of {k['levels']} levels (change "
                    f"{k['change']:+.3f} [{k['ci95'][0]:+.3f}, {k['ci95'][1]:+.3f}])"
                )
    if "retarget" in summary:
        r = summary["retarget"]
        d = r["tracking_vs_random"]
        print(
            f"retargeting: reached the target {r['reached']['tracking']:.3f} (tracking channels) vs "
            f"{r['reached']['random']:.3f} (random) vs {r['reached']['plain']:.3f} (plain); "
            f"difference {d['change']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"
        )
