"""One declarative edit at any hook point (``proclab analyze edit --hook H --edit SPEC``).

The edit (an :class:`~proclab.models.interventions.Intervention`, parsed from ``--edit``) is applied on every forward pass of the agent
(feed-forward or recurrent) while it plays ``--episodes`` complete episodes per arm on the same
levels as the plain agent (:func:`~proclab.interpret.interventions.command.record_arm`), compared
paired by level like every other intervention; outputs in ``ANALYSIS/intervene-edit/``. ``mean`` and
``resample`` edits read the hook's recorded distribution: the agent replayed on the folder's store
(``--data`` of ``analyze hidden``, or ``--data`` here), at most ``--source-steps`` steps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from proclab.errors import ProclabError
from proclab.interpret.bases.activations import HOOK, episode_subset, read_activation
from proclab.models.edited import hook_shapes
from proclab.models.interventions import NEEDS_SOURCE, Intervention, parse_intervention
from proclab.store import EpisodeStore

NAME = "intervene-edit"


def hook_distribution(data: Path, hook: str, checkpoint: Path, steps: int, seed: int, runtime) -> np.ndarray:
    """``(N, D)`` activations at ``hook`` of the agent replayed (on ``runtime``) on a seeded subset of
    ``data``'s episodes holding about ``steps`` steps."""

    store = EpisodeStore(data)
    episodes = episode_subset(store, steps, seed)
    return read_activation(store, HOOK + hook, episodes, checkpoint=checkpoint, runtime=runtime).x


def hook_edit(
    hook: str, spec: str, agent, checkpoint: Path, data: Path | None, runtime, *, steps: int, seed: int
) -> Intervention:
    """The edit ``spec`` (SELECTION KIND [VALUE]) at ``hook`` of ``agent``; a mean or resample edit draws from
    :func:`hook_distribution` of the agent (``checkpoint``) replayed on the store ``data``."""
    kind = spec.split()[-1] if spec else ""
    source = None
    if kind in NEEDS_SOURCE:
        if data is None:
            raise ProclabError(
                f"a {kind} edit needs recorded activations: pass --data DATA (an episode store)"
            )
        shape = hook_shapes(agent)[hook]
        x = hook_distribution(data, hook, checkpoint, steps, seed, runtime)
        pool = torch.as_tensor(x).reshape(-1, *shape)
        source = pool.mean(0) if kind == "mean" else pool
    return parse_intervention(hook, spec, source)
