"""``proclab data info`` and ``proclab data export``: what an episode store holds (:mod:`proclab.store.info`), and
its episodes as .npz files or one HDF5 file in Minari's layout (:mod:`proclab.store.formats` writes them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import tyro

from proclab.errors import ProclabError
from proclab.io.arguments import DATA
from proclab.store.formats import export_minari, export_npz
from proclab.store.info import damage_report, print_summary, summarize
from proclab.store.store import EpisodeStore


@dataclass(frozen=True)
class InfoArgs:
    """Show what an episode store holds: episodes, steps, games, returns, fields, schema, size on disk."""

    data: Annotated[Path, DATA]
    """The episode store (the directory given to proclab record --out)."""
    json: bool = False
    """Print the summary as JSON."""
    verify: bool = False
    """Also read back every chunk of every committed row (walks the whole store): a missing chunk, or one
    whose checksum fails (a flipped byte), is listed with its shard and episodes, and the exit status is 2."""


def info_command(argv: list[str], prog: str = "proclab data info") -> None:
    args = tyro.cli(InfoArgs, args=argv, prog=prog)
    store = EpisodeStore(args.data, verify=args.verify)
    summary = summarize(store)
    damaged = store.verify() if args.verify else []
    if args.json:
        print(json.dumps({**summary, "damaged": damaged} if args.verify else summary, indent=2))
    else:
        print_summary(summary)
    if damaged:
        raise ProclabError(damage_report(store, damaged))


@dataclass(frozen=True)
class ExportArgs:
    """Export an episode store's episodes as plain .npz files or one HDF5 file in Minari's layout."""

    data: Annotated[Path, DATA]
    """The episode store (the directory given to proclab record --out)."""
    out: Path
    """npz: the directory to write episode_<i>.npz and index.json into; minari: the HDF5 file to write."""
    format: Literal["npz", "minari"] = "npz"
    """npz (NumPy alone reads it) or minari (Minari's main_data.hdf5 layout; needs h5py)."""
    episodes: tuple[int, ...] = ()
    """Episode indices to export (default: all committed episodes)."""
    fields: tuple[str, ...] = ()
    """npz only: per-step fields to keep (default: all)."""


def export_command(argv: list[str], prog: str = "proclab data export") -> None:
    args = tyro.cli(ExportArgs, args=argv, prog=prog)
    store = EpisodeStore(args.data)
    episodes = list(args.episodes) or None
    if args.format == "minari":
        if args.fields:
            raise ProclabError("--fields applies to --format npz only: Minari's layout holds every field")
        out = export_minari(store, args.out, episodes)
    else:
        out = export_npz(store, args.out, episodes, list(args.fields) or None)
    print(f"exported {len(episodes) if episodes else store.num_episodes} episode(s) to {out}")
