"""``proclab analyze edit --hook H --edit SPEC``: one declarative edit at any hook point, played.

The edit (an :class:`~proclab.models.interventions.Intervention`, parsed from ``--edit``) is applied on every forward pass of the agent
(feed-forward or recurrent) while it plays ``--episodes`` complete episodes per arm on the same
levels as the plain agent (:func:`~proclab.interpret.interventions.command.record_arm`), compared
paired by level like every other intervention; outputs in ``ANALYSIS/intervene-edit/``. ``mean`` and
``resample`` edits read the hook's recorded distribution: the agent replayed on the folder's store
(``--data`` of ``analyze hidden``, or ``--data`` here), at most ``--source-steps`` steps.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, ClassVar

import numpy as np
import torch
import tyro

from proclab.errors import ProclabError
from proclab.interpret.bases.activations import HOOK, episode_subset, read_activation
from proclab.interpret.interventions.command import ARMS, ArmEpisodes, compare_real, record_arm
from proclab.interpret.interventions.edit_target import ArmArgs, agent_checkpoint
from proclab.interpret.workspace.args import DATA
from proclab.interpret.workspace.folder import Workspace
from proclab.io.progress import phases
from proclab.io.run_dirs import write_json_atomic
from proclab.models.edited import Intervened, hook_shapes
from proclab.models.interventions import NEEDS_SOURCE, Intervention, parse_intervention
from proclab.models.loading import load_agent
from proclab.store import EpisodeStore

NAME = "intervene-edit"


@dataclass(frozen=True)
class HookEditArgs(ArmArgs):
    """Edit: one declarative edit at any hook point while the agent plays the real game, paired by level.

    The edit applies on every forward pass (feed-forward agents too); the edited and the plain agent play the
    same levels. Outputs in ANALYSIS/intervene-edit/. Edits of the folder's basis directions: analyze
    intervene."""

    PRESETS: ClassVar[dict[str, dict]] = {"paper": {}, "small": {"episodes": 20}}

    seed: int = 0
    """Seed of the envs (the levels each slot plays), sampled actions (--no-greedy), the episodes replayed for
    a mean/resample distribution and the bootstrap."""
    hook: str = tyro.MISSING
    """Hook point edited (any of the agent's: torso.block1.hook_out, torso.hook_fc, core.0.hook_h, ...)."""
    edit: Annotated[str, tyro.conf.arg(metavar="SPEC")] = tyro.MISSING
    """SELECTION KIND [VALUE]; SELECTION is all, 'channel C', 'site C@Y,X' or 'units I,J'; KIND set/add/scale
    VALUE, or mean/resample (the hook's recorded distribution, from --data), e.g. 'channel 7 set 0'."""
    data: DATA = None
    """With a mean/resample edit: the episode store replayed for the hook's distribution (default: the
    folder's)."""
    source_steps: int = 20_000
    """At most about this many recorded steps make the mean/resample distribution."""


def hook_distribution(data: Path, hook: str, checkpoint: Path, steps: int, seed: int, runtime) -> np.ndarray:
    """``(N, D)`` activations at ``hook`` of the agent replayed (on ``runtime``) on a seeded subset of
    ``data``'s episodes holding about ``steps`` steps."""

    store = EpisodeStore(data)
    episodes = episode_subset(store, steps, seed)
    return read_activation(store, HOOK + hook, episodes, checkpoint=checkpoint, runtime=runtime).x


def build_edit(args: HookEditArgs, agent, checkpoint: Path, data: Path | None, runtime) -> Intervention:
    """The ``--edit`` at ``--hook``, with the recorded distribution it needs (mean, resample)."""
    kind = args.edit.split()[-1] if args.edit else ""
    source = None
    if kind in NEEDS_SOURCE:
        if data is None:
            raise ProclabError(
                f"a {kind} edit needs recorded activations: pass --data DATA (an episode store)"
            )
        shape = hook_shapes(agent)[args.hook]
        x = hook_distribution(data, args.hook, checkpoint, args.source_steps, args.seed, runtime)
        pool = torch.as_tensor(x).reshape(-1, *shape)
        source = pool.mean(0) if kind == "mean" else pool
    return parse_intervention(args.hook, args.edit, source)


def run_edit(args: HookEditArgs) -> Path:
    """Baseline and edited agent on the same levels; paired changes of return, completion, length, actions."""

    start = time.time()
    args.require_positive("episodes", "num_envs", "bootstrap", "source_steps")
    ws = Workspace.open(args.out)
    rt = args.runtime()
    checkpoint = agent_checkpoint(ws, args.agent, "analyze edit")
    data = args.data or (Path(ws.inputs["data"]) if ws.inputs.get("data") else None)
    ws.require_inputs(checkpoint=checkpoint)
    agent, _, _ = load_agent(checkpoint, rt)
    edit = build_edit(args, agent, checkpoint, data, rt)
    out = ws.command_dir(NAME)
    paths = {}
    with phases(2, NAME) as ph:
        for arm, a in zip(ARMS, (agent, Intervened(agent, [edit])), strict=True):
            with ph.phase(f"real env: {arm} ({args.episodes} episodes)"):
                tag = {"arm": arm, "spec": edit.describe()}
                paths[arm] = record_arm(
                    a, checkpoint, out / "real" / f"{arm}.zarr", args, rt, {"intervention": tag}
                )
    base, inter = (ArmEpisodes.read(paths[a], agent.config.num_actions) for a in ARMS)
    summary = {
        "intervention": edit.describe(),
        "hook": args.hook,
        "real": compare_real(base, inter, args.bootstrap, args.seed)
        | {"split": args.split, "greedy": args.greedy, "checkpoint": str(checkpoint)},
        "seconds": round(time.time() - start, 3),
    }
    write_json_atomic(out / "summary.json", summary)
    ws.record_command(
        NAME, asdict(args), [str(out / "summary.json"), *map(str, paths.values())], time.time() - start
    )
    return ws.final(out)
