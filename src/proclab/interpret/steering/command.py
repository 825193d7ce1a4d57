"""``proclab analyze steer``: add a contrastive vector at a hook during real play, against same-norm
controls; retarget by channels, against random channel sets.

Parse -> call -> write: :func:`proclab.interpret.steering.steer.steer` plays the agent (any agent in memory
there; its module docstring says what is played and how it is judged); this command loads ``--agent`` and
writes ``ANALYSIS/steer/summary.json`` and ``vector.pt`` (the mean vector over ``--vector-levels``).

By default every held-out level is steered by its own with-minus-without vector (Mini et al.'s);
``--no-per-level`` plays the mean vector instead and says so in the output. ``--controls`` (default 20)
same-norm random directions and an instance control play at every non-zero coefficient; binary
outcomes are judged by exact McNemar tests, Holm-corrected over all of them.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, ClassVar

import torch
import tyro

from proclab.errors import ProclabError
from proclab.interpret.interventions.edit_target import agent_checkpoint
from proclab.interpret.steering.steer import SteerSettings, check_coefficients, steer
from proclab.interpret.workspace.command import AGENT, AnalysisArgs
from proclab.interpret.workspace.folder import Workspace
from proclab.io.arguments import LevelRuleFlag, settings_from
from proclab.io.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.levels.file import read_level_states
from proclab.models.loading import load_agent
from proclab.run.tasks import TaskSettings

NAME = "steer"


@dataclass(frozen=True)
class SteerArgs(AnalysisArgs, LevelRuleFlag):
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
    split: str = "held-out"
    """Levels played: held-out (levels the agent never trained on), a named split or START:NUM."""
    levels: int = 200
    """Held-out levels, each played once per coefficient (and per retargeting arm)."""
    vector_level_rule: str | None = None
    """Edit the levels of --vector-levels by this level rule instead of --level-rule's (e.g. build CoinRun's
    coin vector from levels whose coin was moved into view, and play the levels as they are)."""
    levels_from: Path | None = None
    """Play the states of this level-state file as the held-out levels (each once per variant; --levels
    and --split unused): edited levels (proclab level edit) or recorded ones (level export). The vector
    is still built from --vector-levels."""
    coefficients: str = "-2,-1,0,1,2"
    """Coefficients of the vector (0 is the plain agent, the baseline of the paired comparisons)."""
    per_level: bool = True
    """Steer each held-out level with its own vector (that level with minus without the entity, as Mini et
    al. did; levels without the entity get none). --no-per-level: one mean vector over --vector-levels,
    which is smeared over where their entities lie (the output says it was asked for)."""
    controls: int = 20
    """Same-norm controls at every non-zero coefficient: this many random Gaussian directions of the vector's
    norm (per level), plus the with-minus-without difference of one random instance of another kind (0: only
    the instance control)."""
    channels: tuple[int, ...] = ()
    """Retargeting: channels of the hook's map that track the entity (none: no retargeting)."""
    channel_controls: int = 20
    """Retargeting's null: this many random sets of as many other channels, each written the same way."""
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
    """Bootstrap resamples of the paired CIs of continuous outcomes (return, steps, walks, shares of draws)."""
    parts: int = 1
    """Play the held-out levels in this many blocks, each saved in ANALYSIS/steer-parts/ as it is played: the
    same command run again plays only the blocks not yet saved, and the statistics run once, when every block
    is in (the numbers are those of the steering in one block; docs/scale.md)."""
    workers: int = 1
    """Play the blocks of --parts in this many local processes at a time."""
    ray_address: Annotated[str | None, tyro.conf.arg(aliases=("--ray",))] = None
    """Play the blocks of --parts as Ray tasks on this cluster (HOST:6379, auto; default: $RAY_ADDRESS, else
    locally); each block comes back to this process, which saves it. Needs pip install 'proclab[distributed]'."""
    cpus_per_part: float = 1
    """CPUs Ray reserves for each block."""


def parse_coefficients(text: str) -> tuple[float, ...]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ProclabError(
            f"--coefficients {text!r}: expected numbers separated by commas, e.g. -2,-1,0,1,2"
        ) from None
    return tuple(check_coefficients(values))


def run_steer(args: SteerArgs) -> Path:
    start = time.time()
    settings = settings_from(args, SteerSettings, coefficients=parse_coefficients(args.coefficients))
    ws = Workspace.open(args.out)
    checkpoint = agent_checkpoint(ws, args.agent, "analyze steer")
    ws.require_inputs(checkpoint=checkpoint)
    rt = args.runtime()
    agent, _, _ = load_agent(checkpoint, rt)
    files = read_level_states(args.levels_from) if args.levels_from is not None else None
    out = ws.command_dir(NAME)
    tasks = TaskSettings(args.workers, args.ray_address, args.cpus_per_part)
    blocks = ws.path / f"{NAME}-parts" if args.parts > 1 else None
    with phases(3, NAME):
        result = steer(
            agent, args.hook, level_states=files, runtime=rt, settings=settings, tasks=tasks, folder=blocks
        )
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
    for name in ("controls", "paths", "retarget"):
        if getattr(result, name) is not None:
            summary[name] = getattr(result, name)
    summary["seconds"] = round(time.time() - start, 3)
    write_json_atomic(out / "summary.json", summary)
    _print(summary)
    ws.record_command(
        NAME, asdict(args), [str(out / "summary.json"), str(out / "vector.pt")], time.time() - start
    )
    return ws.final(out)


def _against_random(d: dict) -> str:
    """A difference to the random draws' mean: its interval, permutation p and corrected p."""
    return (
        f"{d['change']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}] "
        f"(permutation p {d['p_permutation']:.3g}, {d['correction']} {d['p_adjusted']:.3g})"
    )


def _binary(t: dict) -> str:
    return (
        f"{t['intervened']:.3f} (change {t['change']:+.3f}: {t['gained']} levels gained, {t['lost']} lost; "
        f"McNemar p {t['p_exact']:.3g}, {t['correction']} {t['p_adjusted']:.3g})"
        if "p_adjusted" in t
        else f"{t['intervened']:.3f}"
    )


def _print(summary: dict) -> None:
    v = summary["vector"]
    if v["kind"] == "mean":
        print(f"vector: the mean over levels {v['levels']}, as --no-per-level asked: {v['why']}")
    else:
        print(
            f"vector: each held-out level's own ({v['levels_with_entity']} of {summary['levels']} hold the entity)"
        )
    for c, r in summary["coefficients"].items():
        print(
            f"coefficient {c:>5}: level completed {_binary(r['level_complete'])}, return change {r['return']['change']:+.3f}"
        )
        for kind, k in r.get("reach", {}).items():
            print(f"    reached {kind} on {k['levels']} levels: {_binary(k)}")
    for c, by_outcome in summary.get("controls", {}).items():
        for name, e in by_outcome.items():
            line = f"controls at {c}, {name}: vector {e['vector_vs_plain_change']:+.3f} vs plain"
            if "random" in e:
                rnd = e["random"]
                d = rnd["vector_vs_random"]
                line += (
                    f"; {rnd['draws_as_extreme']} of {rnd['draws']} random same-norm directions change it as much "
                    f"(p {rnd['p_rank']:.3f}); vector minus random {_against_random(d)}"
                )
            print(line + f"; vector vs instance control {_binary(e['vector_vs_instance'])}")
    for c, w in summary.get("paths", {}).items():
        if isinstance(w, dict):
            print(
                f"walk at {c} on the level with the entity vs the plain agent without it: same cell on "
                f"{w['vector']:.3f} of steps (plain {summary['paths']['plain_with_entity']:.3f}, "
                f"random {w.get('random', float('nan')):.3f}, instance {w['instance']:.3f})"
            )
    if "retarget" in summary:
        r = summary["retarget"]
        line = (
            f"retargeting: reached the target {r['reached']['tracking']:.3f} (tracking channels) vs "
            f"{r['reached']['plain']:.3f} (plain): {_binary(r['tracking_vs_plain'])}"
        )
        if "random_sets" in r:
            rs = r["random_sets"]
            d = rs["tracking_vs_random"]
            line += (
                f"; random channel sets {r['reached']['random']:.3f}, tracking minus random {_against_random(d)}, "
                f"{rs['draws_as_extreme']} of {len(rs['changes'])} "
                f"sets as extreme (p {rs['p_rank']:.3f})"
            )
        print(line)
