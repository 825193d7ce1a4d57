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
* :meth:`Result.save` -> a folder with ``result.json`` (every field that is not an array, and the result's
  ``type``) and ``arrays.npz`` (every numpy array and torch tensor), written atomically and never over an
  existing folder unless asked; a result whose fields do not fit JSON (a basis, a fitted transform, an
  activation cache) writes them as files of their own beside these (:meth:`Result._write_files`);
* :meth:`Result.load` (``Probes.load(folder)``) -> the result :meth:`Result.save` wrote, equal to it;
* :meth:`Result.to_dict` -> the JSON-able content, what ``summary.json`` files of the commands hold.

**Loading** rebuilds every field from its annotation (:func:`restore`): nested dataclasses and results, tuples,
lists, dicts (their keys converted to the annotated key type, ``dict[int, ...]``), paths, numpy arrays from
``arrays.npz`` and torch tensors where the annotation is a ``Tensor``. A non-finite float is null in
``result.json`` (JSON has none; ``summary.json`` files say the same) and its value is kept in ``arrays.npz``, so
NaN and the infinities come back as they were, wherever they are (a null without that value, in a folder
written by hand, is NaN where the annotation is ``float``). What no annotation says comes back as JSON holds
it: inside a field annotated only as ``dict``, ``list`` or ``Any``, tuples are lists, keys strings and tensors
numpy arrays. A field marked ``metadata={"saved": False}`` comes back from the result's own files, or as its
default (a live agent is not saved). A folder another result type wrote is refused in one line.

The CLI's commands are parse -> call -> write: they call the same function and save its result.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import json
import math
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeGuard, cast

import numpy as np

from proclab.errors import ProclabError
from proclab.io.files import load_npz, read_json, replacing, save_npz, write_json, write_text

if TYPE_CHECKING:
    import pandas  # pyright: ignore[reportMissingImports]  (optional: only to_frame needs it)
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from proclab.io import drawing

RESULT_JSON = "result.json"
ARRAYS = "arrays.npz"


def jsonable(value: Any, arrays: dict[str, np.ndarray] | None = None, where: str = "") -> Any:
    """``value`` as JSON: dataclasses as dicts (without the fields marked ``metadata={"saved": False}``, such
    as a live agent), mappings as dicts, tuples as lists, tensors and numpy arrays alike, numpy scalars as
    numbers, non-finite floats as None (JSON has none); arrays go to ``arrays`` under their dotted path (or into
    lists when ``arrays`` is None), and so do the non-finite floats, for :func:`restore` to give them back."""
    if not isinstance(value, type) and dataclasses.is_dataclass(value):
        kept = [f for f in dataclasses.fields(value) if f.metadata.get("saved", True)]
        value = {f.name: getattr(value, f.name) for f in kept}
    if isinstance(value, Mapping):
        value = dict(value)
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {str(k): jsonable(v, arrays, _inside(where, str(k))) for k, v in value.items()}
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
        if arrays is not None:
            arrays[where] = np.asarray(value)
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def restore(tp: Any, value: Any, arrays: Mapping[str, np.ndarray], where: str) -> Any:
    """``value``, as :func:`jsonable` wrote it at dotted path ``where`` with its arrays in ``arrays``, read back
    as the annotation ``tp`` says (module docstring: **Loading**)."""
    if value is None and where in arrays:  # a non-finite float
        return float(arrays[where])
    if _array_reference(value, arrays):
        array = arrays[value["array"]]
        return _tensor(array) if _names_tensor(tp) else array
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        arms = [a for a in args if a is not type(None)]
        if value is None and len(arms) < len(args):
            return None
        return restore(next((a for a in arms if _fits(a, value)), arms[0]), value, arrays, where)
    if value is None:
        return math.nan if tp is float else None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return tp(**restored_fields(tp, value, arrays, where))
    if tp in (float, Path):
        return tp(value)
    if tuple in (tp, origin):
        kinds = (args[0],) * len(value) if args[1:] == (Ellipsis,) else args or (Any,) * len(value)
        return tuple(
            restore(k, v, arrays, f"{where}.{i}") for i, (k, v) in enumerate(zip(kinds, value, strict=True))
        )
    if origin in (list, Sequence):
        return [restore(args[0], v, arrays, f"{where}.{i}") for i, v in enumerate(value)]
    if origin in (dict, Mapping):
        key, item = args
        return {
            key(k) if key in (int, float) else k: restore(item, v, arrays, _inside(where, k))
            for k, v in value.items()
        }
    return _untyped(value, arrays, where)


def restored_fields(
    cls: type, content: Mapping[str, Any], arrays: Mapping[str, np.ndarray], where: str = ""
) -> dict[str, Any]:
    """The saved fields of dataclass ``cls`` in ``content`` (:func:`jsonable` output at dotted path ``where``)
    read back by their annotations; a name ``cls`` lacks is refused in one line."""
    hints = typing.get_type_hints(cls)
    saved = {f.name for f in dataclasses.fields(cls) if f.init and f.metadata.get("saved", True)}
    unknown = sorted(set(content) - saved)
    if unknown:
        raise ProclabError(f"saved {cls.__name__} has fields it lacks: {', '.join(unknown)}")
    return {
        name: restore(hints[name], value, arrays, _inside(where, name)) for name, value in content.items()
    }


def _inside(where: str, key: str) -> str:
    """The dotted path of ``key`` inside the mapping at ``where``, as :func:`jsonable` names it."""
    return f"{where}.{key}" if where else key


def _array_reference(value: Any, arrays: Mapping[str, np.ndarray]) -> TypeGuard[dict[str, Any]]:
    """Whether ``value`` is what :func:`jsonable` left in place of an array it put in ``arrays``."""
    return (
        isinstance(value, dict) and value.keys() == {"array", "shape", "dtype"} and value["array"] in arrays
    )


def _names_tensor(tp: Any) -> bool:
    """Whether annotation ``tp`` is a torch tensor (or an optional one), without importing torch."""
    return any(
        getattr(t, "__name__", "") == "Tensor" and getattr(t, "__module__", "").startswith("torch")
        for t in (tp, *typing.get_args(tp))
    )


def _tensor(array: np.ndarray):
    # lazy: torch is slow to import, and only results that hold tensors need it
    import torch

    return torch.from_numpy(array)


def _fits(tp: Any, value: Any) -> bool:
    """Whether a JSON ``value`` can be of the (non-union) annotation ``tp``: picks the arm of a union."""
    kind = typing.get_origin(tp) or tp
    if isinstance(value, list):
        return kind in (list, tuple, Sequence)
    if isinstance(value, dict):
        return kind in (dict, Mapping) or dataclasses.is_dataclass(tp)
    if isinstance(value, str):
        return kind in (str, Path)
    return isinstance(value, kind) if isinstance(kind, type) else False


def _untyped(value: Any, arrays: Mapping[str, np.ndarray], where: str) -> Any:
    """``value`` as JSON holds it at ``where``, its members read back with no annotation (their arrays and
    non-finite floats put back)."""
    if isinstance(value, dict):
        return {k: restore(Any, v, arrays, _inside(where, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [restore(Any, v, arrays, f"{where}.{i}") for i, v in enumerate(value)]
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


def csv_text(rows: list[dict]) -> str:
    """``rows`` as CSV text: one column per key, in the order the rows first name them; None is empty."""
    heads = list(dict.fromkeys(k for row in rows for k in row))
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=heads, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
    return text.getvalue()


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

    def to_frame(self) -> pandas.DataFrame:
        """:meth:`table` as a pandas DataFrame (pandas is not a dependency of proclab: install it to use this)."""
        try:
            # lazy: optional, only this method needs it
            import pandas  # pyright: ignore[reportMissingImports]
        except ImportError:
            raise ProclabError(f"{type(self).__name__}.to_frame needs pandas: pip install pandas") from None
        return pandas.DataFrame(self.table())

    def to_csv(self, path: str | Path | None = None) -> str:
        """:meth:`table` as CSV (one column per key, in the order the rows first name them; None is empty),
        also written to ``path`` atomically when given."""
        text = csv_text(self.table())
        if path is not None:
            write_text(path, text, f"{type(self).__name__} table")
        return text

    def plot(self, ax: Axes | None = None) -> Figure:
        """A matplotlib figure of the result (the results that have a picture override this)."""
        raise ProclabError(f"{type(self).__name__} has no plot; read .table() or .to_dict()")

    def save(self, folder: str | Path, overwrite: bool = False) -> Path:
        """``folder/result.json`` (fields, arrays replaced by references), ``folder/arrays.npz`` and the result's
        own files (:meth:`_write_files`), written under a temporary name and renamed; an existing folder is
        refused unless ``overwrite``."""
        folder = Path(folder)
        if folder.exists() and not overwrite:
            raise ProclabError(f"{str(folder)!r} exists; pass overwrite=True to replace it")
        arrays: dict[str, np.ndarray] = {}
        content = {"type": type(self).__name__, **jsonable(self, arrays)}
        objects = [k for k, a in arrays.items() if a.dtype.hasobject]  # np.savez would pickle them
        if objects:
            raise ProclabError(
                f"{type(self).__name__} cannot be saved: {', '.join(objects)} hold Python objects (give them a "
                "numeric or string dtype)"
            )
        with replacing(folder, f"{type(self).__name__} result") as tmp:
            tmp.mkdir(parents=True)
            write_json(tmp / RESULT_JSON, content, "result")
            if arrays:
                save_npz(tmp / ARRAYS, "result arrays", **arrays)
            self._write_files(tmp)
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> Self:
        """The result :meth:`save` wrote in ``folder``, equal to the one saved (module docstring: **Loading**);
        a folder that holds another type of result is refused in one line."""
        folder = Path(folder)
        content = read_json(folder / RESULT_JSON, "result")
        arrays = load_npz(folder / ARRAYS, "result arrays") if (folder / ARRAYS).is_file() else {}
        fields = cls._fields_of(content, arrays, repr(str(folder)))
        return cls(**fields, **cls._read_files(folder, fields))

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The result as named arrays, for one file of arrays to hold it (a unit of a long job kept by
        :mod:`proclab.run.parts`): what :meth:`save` writes, ``result.json`` as text and each array under
        ``arrays.npz:PATH``; :meth:`from_arrays` reads it back, equal. A result with files of its own (fields
        ``result.json`` leaves out) is not held whole this way."""
        arrays: dict[str, np.ndarray] = {}
        content = {"type": type(self).__name__, **jsonable(self, arrays)}
        return {RESULT_JSON: np.array(json.dumps(content)), **{f"{ARRAYS}:{k}": v for k, v in arrays.items()}}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> Self:
        """The result :meth:`to_arrays` gave (a dict, or an open ``.npz`` of it)."""
        content = json.loads(str(arrays[RESULT_JSON]))
        inner = {k.split(":", 1)[1]: np.asarray(arrays[k]) for k in arrays if k.startswith(f"{ARRAYS}:")}
        return cls(**cls._fields_of(content, inner, "these arrays"))

    @classmethod
    def _fields_of(cls, content: Any, arrays: Mapping[str, np.ndarray], where: str) -> dict[str, Any]:
        """The fields saved as ``content`` (``result.json``'s) and ``arrays``; refused in one line when they are
        another type of result's (``where``: what holds them)."""
        kind = content.pop("type", None) if isinstance(content, dict) else None
        if kind != cls.__name__:
            raise ProclabError(f"{where} holds a {kind} result, not a {cls.__name__}")
        return restored_fields(cls, content, arrays)

    def _write_files(self, folder: Path) -> None:
        """Write the fields that ``result.json`` leaves out (``metadata={"saved": False}``) and that can be
        saved, each as a file of its own in ``folder`` (before it is published); a result with such fields
        overrides this and :meth:`_read_files`."""

    @classmethod
    def _read_files(cls, folder: Path, fields: dict[str, Any]) -> dict[str, Any]:
        """The fields :meth:`_write_files` wrote in ``folder``, by name (``fields``: the others, read back)."""
        return {}

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
            # without axes, a result draws on a figure of its own: proclab's, which shows itself as PNG
            return cast("drawing.Figure", self.plot())._repr_png_()
        except ProclabError:
            return None
