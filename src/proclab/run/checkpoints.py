"""When a run saves a checkpoint, and how many it keeps.

The checkpoint files themselves (safetensors + JSON, atomic) are :mod:`proclab.io.checkpoint`'s;
the RNG streams that make a resume exact are :func:`proclab.run.runtime.rng_state`.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def crossed(previous_step: int, step: int, every: int) -> bool:
    """True when a multiple of ``every`` lies in ``(previous_step, step]`` (time for a checkpoint)."""
    return step // every > previous_step // every


def prune_checkpoints(directory: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` ``step_*`` checkpoints in ``directory`` (0 = keep all)."""
    if keep > 0:
        for old in sorted(directory.glob("step_*"))[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
