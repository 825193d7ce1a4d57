"""``proclab wm train``: the command line of :mod:`.trainer` (``--preset``, flags, ``--resume``, torchrun)."""

from __future__ import annotations

import math
from pathlib import Path

import tyro

from proclab.run.distributed import train_on_ranks
from proclab.run.parser import RunParser
from proclab.store import EpisodeStore
from proclab.worldmodel.config import WM_SIZES, WMTrainConfig, saved_train_config, wm_size
from proclab.worldmodel.trainer import WMTrainer, new_run_dir

# -- command line ------------------------------------------------------------------------------
DESCRIPTION = """Train the generative agent-environment model (interpreting-rl-behavior's Gen-2) on an episode
store.

--preset NAME      start from a named preset: {presets} (flags below override it; default paper)
--resume RUN_DIR   continue a stopped run exactly (only --total-updates and --time-limit may change; a
                   finished run is left as it is unless --total-updates asks for more)
--time-limit S     stop after S seconds of this session with a checkpoint; --resume continues it and
                   each resumed session gets the saved limit again (or a new --time-limit), so sessions
                   add up to one run, bit-identical to an uninterrupted one"""


def parse_args(argv: list[str], prog: str = "proclab wm train") -> tuple[WMTrainConfig, Path | None]:
    """``--preset NAME`` picks the defaults, other flags override fields; ``--resume RUN_DIR`` continues."""
    return RunParser(
        prog=prog,
        flags=lambda rest, default, prog, description: tyro.cli(
            WMTrainConfig, args=rest, default=default, prog=prog, description=description
        ),
        start=lambda chosen, rest: wm_size(chosen["--preset"]) if chosen["--preset"] else WMTrainConfig(),
        saved=lambda data, run_dir: saved_train_config(data),
        may_change="--total-updates",
        session_flags=("--time-limit",),
        end_step=lambda config: config.total_updates,
        description=DESCRIPTION.format(presets=", ".join(WM_SIZES)),
    ).parse(argv)


def _report(trainer: WMTrainer, out: Path) -> None:
    last = trainer.logger.rows[-1] if trainer.logger and trainer.logger.rows else {}
    print(
        f"trained {trainer.updates:,} updates in {trainer.train_seconds / 3600:.2f} h of training (all sessions); "
        f"last logged loss {float(last.get('losses/total', math.nan)):.2f}"
    )
    print(f"run directory: {out}")


def main(argv: list[str], prog: str = "proclab wm train") -> None:
    config, resume_dir = parse_args(argv, prog)
    train_on_ranks(
        WMTrainer, config, resume_dir, lambda cfg: new_run_dir(cfg, EpisodeStore(cfg.data)), _report
    )
