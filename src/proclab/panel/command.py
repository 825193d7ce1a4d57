"""``proclab panel export`` and ``proclab panel serve``: an analysis folder as a panel (:mod:`.export`), and
the local server that shows it (:mod:`.server`).

The export reads activations with torch: it is imported when the command runs, so that ``proclab panel
export --help`` answers at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from proclab.io.arguments import settings_from
from proclab.panel.server import IDLE_TIMEOUT, serve


@dataclass(frozen=True)
class ExportArgs:
    """Export an analysis folder as a self-contained panel folder (open it with proclab panel serve). It
    computes nothing but a feed-forward agent's hook activations, replayed on the CPU in fp32 (the analyses'
    reader), so it takes no runtime flags."""

    analysis: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="ANALYSIS")]
    """The analysis folder (proclab analyze ... --out ANALYSIS); needs analyze hidden's basis."""
    out: Path
    """The panel folder to write (its data/ is replaced)."""
    samples: int = 1000
    """Simulated samples to include (the sample store's first N)."""
    real: int = 50
    """Real episodes to include (windows of the --real saliency run, else the store's first episodes)."""
    background: int = 3000
    """Real states drawn as the scatter's background cloud (a seeded random subset)."""
    eval: tuple[Path, ...] = ()
    """Eval result files (proclab eval --out FILE); default: eval*.json in the agent's run directory."""
    chunk: int = 500
    """Samples per chunk of the per-step arrays (the page fetches a chunk when it needs one)."""
    atlas_moments: int = 1
    """Per atlas card: its first N top and bottom moments get a window in the episode viewer (0: none)."""
    title: str | None = None
    """Page title (default: the analysis folder's name)."""
    seed: int = 0
    """Seed of the background subset."""


def export_command(argv: list[str], prog: str = "proclab panel export") -> None:
    args = tyro.cli(ExportArgs, args=argv, prog=prog)
    # lazy: command dispatch; the export needs torch, which --help must not pay for
    from proclab.panel.export import PanelSettings, export

    out = export(args.analysis, args.out, settings_from(args, PanelSettings))
    print(f"panel written to {out}; open it with: proclab panel serve {out}")


@dataclass(frozen=True)
class ServeArgs:
    """Serve an exported panel on 127.0.0.1 (GET/HEAD, files inside PANEL only) until Ctrl-C."""

    panel: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="PANEL")]
    """The folder written by proclab panel export --out."""
    port: int = 0
    """TCP port on 127.0.0.1; 0 picks a free one (the URL is printed)."""
    open: bool = False
    """Also open the URL in the default web browser."""
    idle_timeout: float = IDLE_TIMEOUT
    """Close a connection that sends nothing for this many seconds (idle and slow clients)."""


def serve_command(argv: list[str], prog: str = "proclab panel serve") -> None:
    args = tyro.cli(ServeArgs, args=argv, prog=prog)
    serve(args.panel, args.port, args.open, args.idle_timeout)
