"""Typed results: what every analysis function returns, to look at in a notebook, print, plot or save.

An analysis is a function on objects (an agent, a rollout, a cache, a store) returning a frozen
dataclass that subclasses :class:`Result`. Its fields are the numbers (plain values, lists, dicts,
numpy arrays, other results); the base class gives every result the same four verbs, so a researcher
learns them once:

* :meth:`Result.table` -> rows (a list of dicts), the part worth reading as a table; shown as HTML in a
  notebook and as text by ``print``;
* :meth:`Result.plot` -> a matplotlib figure (subclasses that have a picture draw it), also given to a
  notebook as PNG beside the HTML table; frontends show one of the two (mostly the table), so a cell
  ending in ``res.plot()`` shows the picture;
* :meth:`Result.save` -> a folder with ``result.json`` (every field that is not an array) and
  ``arrays.npz`` (every numpy array), written atomically and never over an existing folder unless asked;
* :meth:`Result.to_dict` -> the JSON-able content, what ``summary.json`` files of the commands hold.

The CLI's commands are parse -> call -> write: they call the same function and save its result.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from proclab.errors import ProclabError
from proclab.io.files import replacing, save_npz, write_json

RESULT_JSON = "result.json"
ARRAYS = "arrays.npz"


def jsonable(value: Any, arrays: dict[str, np.ndarray] | None = None, where: str = "") -> Any:
    """``value`` as JSON: dataclasses as dicts (without the fields marked ``metadata={"saved": False}``, such
    as a live agent), mappings as dicts, tuples as lists, tensors and numpy arrays alike, numpy scalars as
    numbers, non-finite floats as None; arrays go to ``arrays`` under their dotted path (or into lists when
    ``arrays`` is None)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kept = [f for f in dataclasses.fields(value) if f.metadata.get("saved", True)]
        value = {f.name: getattr(value, f.name) for f in kept}
    if isinstance(value, Mapping):
        value = dict(value)
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {str(k): jsonable(v, arrays, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v, arrays, f"{where}.{i}") for i, v in enumerate(value)]
    if isinstance(value, np.ndarray):
        if arrays is None:
            return jsonable(value.tolist())
        arrays[where] = value
        return {"array": where, "shape": list(value.shape), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def _text(rows: list[dict]) -> str:
    if not rows:
        return "(no rows)"
    heads = list(dict.fromkeys(k for r in rows for k in r))
    cells = [[_cell(r.get(h)) for h in heads] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True))  # noqa: E731
    return "\n".join([line(heads), line(["-" * w for w in widths]), *map(line, cells)])


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list | tuple) and len(v) == 2 and all(isinstance(x, float) for x in v):
        return f"[{v[0]:.3g}, {v[1]:.3g}]"  # an interval
    return "" if v is None else str(v)


@dataclasses.dataclass(frozen=True)
class Result:
    """Base of every analysis' result (module docstring). Subclasses add fields and override :meth:`table`
    (and :meth:`plot` where a picture says more)."""

    def to_dict(self) -> dict:
        """Every field as JSON (arrays as lists)."""
        return jsonable(self)

    def table(self) -> list[dict]:
        """The rows worth reading as a table; by default one row of the fields that are plain values."""
        row = {k: v for k, v in jsonable(self).items() if not isinstance(v, dict | list)}
        return [row]

    def plot(self, ax=None):
        """A matplotlib figure of the result (the results that have a picture override this)."""
        raise ProclabError(f"{type(self).__name__} has no plot; read .table() or .to_dict()")

    def save(self, folder: str | Path, overwrite: bool = False) -> Path:
        """``folder/result.json`` (fields, arrays replaced by references) and ``folder/arrays.npz``, written
        under a temporary name and renamed; an existing folder is refused unless ``overwrite``."""
        folder = Path(folder)
        if folder.exists() and not overwrite:
            raise ProclabError(f"{str(folder)!r} exists; pass overwrite=True to replace it")
        arrays: dict[str, np.ndarray] = {}
        content = {"type": type(self).__name__, **jsonable(self, arrays)}
        with replacing(folder, f"{type(self).__name__} result") as tmp:
            tmp.mkdir(parents=True)
            write_json(tmp / RESULT_JSON, content, "result")
            if arrays:
                save_npz(tmp / ARRAYS, "result arrays", **arrays)
        return folder

    def __str__(self) -> str:
        return f"{type(self).__name__}\n{_text(self.table())}"

    def __repr__(self) -> str:  # (results with large arrays declare repr=False and get this short form)
        rows = self.table()
        return (
            f"<{type(self).__name__}: {len(rows)} row{'s' * (len(rows) != 1)}; .table(), .to_dict(), .save()>"
        )

    def _repr_html_(self) -> str:
        rows = self.table()
        heads = list(dict.fromkeys(k for r in rows for k in r))
        head = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_cell(r.get(h)))}</td>" for h in heads) + "</tr>"
            for r in rows
        )
        return f"<b>{html.escape(type(self).__name__)}</b><table><tr>{head}</tr>{body}</table>"

    def _repr_png_(self) -> bytes | None:
        """:meth:`plot`'s figure as PNG for a notebook; None (no image, the table alone) for a result without a
        picture (the base class's plot raises) or with nothing to draw."""
        try:
            return self.plot()._repr_png_()
        except ProclabError:
            return None
