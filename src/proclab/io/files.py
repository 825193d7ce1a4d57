"""Files that appear whole or not at all, a full disk as one line, and artefacts read back with one-line errors.

**Writing.** Everything proclab publishes (checkpoints, configs, analysis outputs, panels,
videos, ledgers) is first written under a hidden temporary sibling (``.NAME.tmp-PID-XXXXXXXX``)
and renamed into place by :func:`replacing`, so a crash at any instant (even ``kill -9``)
leaves either the previous version or the complete new one under the real name. A directory
replaces a directory the same way (the old one is renamed aside first, then removed).

**A full disk** (``ENOSPC``, or ``EDQUOT`` when a quota is reached) inside such a write removes
the temporary and becomes a :class:`DiskFullError`: one line naming the file and what it
held, exit status 2. Files written before are untouched, so a run that stops on a full disk
resumes from its last complete checkpoint once space is freed. :func:`disk_errors` gives
appends and foreign writers (zarr, TensorBoard) the same translation.

**Leftovers.** The temporaries of a process killed mid-write cannot be removed by it;
:func:`sweep_temporaries` removes those of dead processes when a writer of that folder starts
(checkpoints, analysis folders, panels).

**Reading.** :func:`read_json` and :func:`load_npz` turn a missing, empty, truncated or corrupt
file into a :class:`~proclab.errors.ProclabError` naming the file and the problem.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import uuid
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from proclab.errors import ProclabError

if TYPE_CHECKING:
    import matplotlib.figure
    from matplotlib.axes import Axes

    from proclab.io.drawing import Figure

DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
_TEMPORARY = re.compile(r"^\..+\.(tmp|old)-(\d+)-[0-9a-f]{8}$")


class DiskFullError(ProclabError):
    """The disk (or the user's quota) filled up while proclab wrote ``path``."""

    def __init__(self, path: str | Path, what: str, err: OSError):
        self.path, self.what, self.err = Path(path), what, err
        super().__init__(
            f"cannot write {what} {str(path)!r}: {err.strerror or os.strerror(err.errno)}; "
            "free some space (or write elsewhere) and run the command again"
        )


@contextlib.contextmanager
def disk_errors(path: str | Path, what: str) -> Iterator[None]:
    """Turn a full disk met inside the block into a :class:`DiskFullError` naming ``path`` and ``what``."""
    try:
        yield
    except OSError as err:
        if err.errno in DISK_FULL:
            raise DiskFullError(path, what, err) from None
        raise


def temporary_sibling(path: Path, tag: str = "tmp") -> Path:
    """A hidden name beside ``path`` that no other process or call uses."""
    return path.with_name(f".{path.name}.{tag}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def remove(path: Path) -> None:
    """Delete a file or a directory tree; a missing one is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def publish(tmp: Path, path: Path) -> None:
    """Rename ``tmp`` over ``path``; a directory over an existing one goes through a rename aside."""
    if tmp.is_dir() and path.exists():  # rename(2) replaces only an empty directory
        old = temporary_sibling(path, "old")
        path.rename(old)
        tmp.rename(path)
        remove(old)
    else:
        os.replace(tmp, path)


@contextlib.contextmanager
def replacing(path: str | Path, what: str) -> Iterator[Path]:
    """A temporary sibling of ``path`` for the block to write (a file, or a directory it creates).

    When the block succeeds the temporary replaces ``path``; when it fails (an exception, a full
    disk) the temporary is removed and ``path`` is left as it was.
    """
    path = Path(path)
    with disk_errors(path, what):
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    try:
        with disk_errors(path, what):
            yield tmp
            publish(tmp, path)
    except BaseException:
        remove(tmp)
        raise


def write_bytes(path: str | Path, data: bytes, what: str, durable: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (``durable``: fsync'ed before the rename)."""
    with replacing(path, what) as tmp, open(tmp, "wb") as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    return Path(path)


def write_json(path: str | Path, data: Any, what: str = "JSON file", indent: int | None = 2) -> Path:
    return write_bytes(path, json.dumps(data, indent=indent, default=str).encode(), what)


def write_text(path: str | Path, text: str, what: str) -> Path:
    return write_bytes(path, text.encode(), what)


def save_npz(path: str | Path, what: str = "arrays", **arrays: Any) -> Path:
    """``np.savez`` to ``path``, atomically."""
    with replacing(path, what) as tmp, open(tmp, "wb") as f:
        np.savez(f, **arrays)
    return Path(path)


def subplots(
    nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None, **options: Any
) -> tuple[Figure, Any]:
    """A new figure and its axes, as ``plt.subplots(nrows, ncols, figsize=..., squeeze=..., sharex=...)``
    returns them, but unknown to pyplot: drawing changes nothing of the user's matplotlib, and the figure
    is freed once unreferenced (:mod:`proclab.io.drawing`). The axes are one or an array of them, as
    ``plt.subplots`` gives them (typed ``Any`` there too)."""
    # lazy: matplotlib is slow to import and only what draws needs it
    from proclab.io.drawing import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **options)


def figure_of(ax: Axes) -> matplotlib.figure.Figure:
    """The figure ``ax`` draws in, whole: for axes of a subfigure its root, the one that can be laid out and
    saved (a subfigure has no ``tight_layout`` nor ``savefig``)."""
    return ax.figure.figure


def figure_and_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[matplotlib.figure.Figure, Axes]:
    """``ax`` and the figure it draws in (:func:`figure_of`), or, without ``ax``, a new figure of ``figsize``
    with one axes (:func:`subplots`): where a result's ``plot(ax)`` draws."""
    return subplots(figsize=figsize) if ax is None else (figure_of(ax), ax)


def save_figure(fig, path: str | Path, **savefig: Any) -> Path:
    """A matplotlib figure saved to ``path`` (format from its suffix), atomically."""
    path = Path(path)
    with replacing(path, "figure") as tmp, open(tmp, "wb") as f:
        fig.savefig(f, format=path.suffix.lstrip(".") or "png", **savefig)
    return path


def user_cache(*parts: str) -> Path:
    """Where proclab keeps what it can make again (chosen learner layouts, downloaded agents):
    ``$PROCLAB_CACHE``, else ``$XDG_CACHE_HOME/proclab``, else ``~/.cache/proclab``; ``parts`` below it."""
    root = os.environ.get("PROCLAB_CACHE")
    if not root:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "proclab"
    return Path(root).joinpath(*parts)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def sweep_temporaries(folder: Path) -> None:
    """Remove the temporaries that processes which no longer run left in ``folder``."""
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            found = _TEMPORARY.match(entry.name)
            if found and int(found.group(2)) != os.getpid() and not _alive(int(found.group(2))):
                remove(entry)


# -- reading ---------------------------------------------------------------------------------------
def read_json(path: str | Path, what: str) -> Any:
    """The JSON document at ``path``; missing, unreadable or invalid is a one-line error naming it."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ProclabError(f"{what} {str(path)!r} is missing") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ProclabError(f"{what} {str(path)!r} is unreadable ({err})") from None
    try:
        return json.loads(text)
    except ValueError as err:
        problem = "empty" if not text.strip() else f"corrupt or truncated (invalid JSON: {err})"
        raise ProclabError(f"{what} {str(path)!r} is {problem}") from None


def load_npz(path: str | Path, what: str) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path``, read in full (so that damage shows now, as one line)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except FileNotFoundError:
        raise ProclabError(f"{what} {str(path)!r} is missing") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as err:
        problem = "empty" if path.is_file() and path.stat().st_size == 0 else f"corrupt or truncated ({err})"
        raise ProclabError(f"{what} {str(path)!r} is {problem}") from None
