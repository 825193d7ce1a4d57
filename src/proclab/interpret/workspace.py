"""The analysis folder (``--out ANALYSIS``) that every ``proclab analyze`` command shares.

``ANALYSIS/analysis.json`` records the *inputs* once (real store ``data``, sample store
``samples``, world model ``wm``, agent ``checkpoint``, the ``activation`` analysed) and, per
command, its arguments, wall time and output files. The basis fitted by ``analyze hidden``
lives beside it (``basis.npz``) and every later command reuses it, so all analyses of a
folder describe one set of states in one coordinate system. A command that names another
input than the one recorded stops with a one-line error *before* it writes anything: mixing
two stores (or two activations) in one folder would silently project states onto a basis
fitted on different data. Each command writes into its own subfolder (``command_dir``).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

from proclab.errors import ProclabError
from proclab.interpret.basis import Basis
from proclab.io.runs import write_json_atomic

ANALYSIS_FILE = "analysis.json"
BASIS_FILE = "basis.npz"
FORMAT = "proclab-analysis"
INPUTS = ("data", "samples", "wm", "checkpoint", "activation")
"""The inputs a folder records: what its states and basis come from."""


def _canonical(value: Any) -> Any:
    """Paths are recorded absolute, so a folder means the same thing from any directory."""
    return str(Path(value).resolve()) if isinstance(value, Path) else value


class Workspace:
    """One analysis folder: its recorded inputs, per-command records, subfolders and the basis."""

    def __init__(self, path: Path, record: dict):
        self.path = path
        self._record = record
        self._pending: dict[str, Any] = {}

    @classmethod
    def open(cls, path: str | Path, create: bool = True) -> Workspace:
        path = Path(path)
        file = path / ANALYSIS_FILE
        if path.exists() and not path.is_dir():
            raise ProclabError(f"analysis folder {str(path)!r} is a file; give a folder for --out")
        if file.is_file():
            try:
                record = json.loads(file.read_text())
            except ValueError as err:
                raise ProclabError(f"{str(file)!r} is not valid JSON ({err})") from None
            if record.get("format") != FORMAT:
                raise ProclabError(f"{str(file)!r} is not a proclab analysis record")
            return cls(path, record)
        if not create:
            raise ProclabError(
                f"{str(path)!r} is not an analysis folder (no {ANALYSIS_FILE}); "
                "run `proclab analyze hidden --out` on it first"
            )
        return cls(path, {"format": FORMAT, "inputs": {}, "commands": {}})

    @property
    def inputs(self) -> dict[str, Any]:
        """Recorded inputs, plus those accepted by :meth:`require_inputs` and not yet recorded."""
        return {**self._record["inputs"], **self._pending}

    @property
    def commands(self) -> dict[str, dict]:
        return dict(self._record["commands"])

    def require_inputs(self, **given: Any) -> dict[str, Any]:
        """Check ``given`` inputs (None: not given) against the recorded ones; new ones are recorded
        with the next :meth:`record_command`. Returns all inputs."""
        for key, value in given.items():
            if key not in INPUTS:
                raise ValueError(f"unknown analysis input {key!r}; inputs are {INPUTS}")
            if value is None:
                continue
            value = _canonical(value)
            recorded = self.inputs.get(key)
            if recorded is not None and recorded != value:
                raise ProclabError(
                    f"analysis folder {str(self.path)!r} was made with {key} {recorded!r}, not {value!r}; "
                    f"use the same {key} or another --out folder"
                )
        self._pending |= {k: _canonical(v) for k, v in given.items() if v is not None}
        return self.inputs

    def input_path(self, key: str, given: Path | None, flag: str) -> Path:
        """The path given on the command line, else the one recorded for ``key``; one is needed."""
        if given is not None:
            return Path(given)
        if self.inputs.get(key) is None:
            raise ProclabError(f"analysis folder {str(self.path)!r} has no {key} yet; give {flag}")
        return Path(self.inputs[key])

    def command_dir(self, name: str) -> Path:
        """The subfolder for command ``name``'s outputs (created)."""
        d = self.path / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def record_command(self, name: str, args: dict, outputs: list[str], seconds: float) -> None:
        """Write the command's record (and any newly given inputs) to ``analysis.json``."""
        self.path.mkdir(parents=True, exist_ok=True)
        self._record["inputs"] = self.inputs
        self._pending = {}
        self._record["commands"][name] = {
            "args": {k: _canonical(v) for k, v in args.items()},
            "seconds": round(float(seconds), 3),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "outputs": [str(o) for o in outputs],
        }
        write_json_atomic(self.path / ANALYSIS_FILE, self._record)

    def finish(self, name: str, args: Any, files: list[Path], summary: dict, start: float) -> Path:
        """Write the command's ``summary.json`` (with its wall time since ``start``, a ``perf_counter``
        value) and record the command; returns its folder."""
        out = self.command_dir(name)
        seconds = time.perf_counter() - start
        write_json_atomic(out / "summary.json", {**summary, "wall_seconds": round(seconds, 3)})
        files = [*files, out / "summary.json"]
        args = dataclasses.asdict(args) if dataclasses.is_dataclass(args) else dict(args)
        self.record_command(name, args, [str(f.relative_to(self.path)) for f in files], seconds)
        return out

    @property
    def basis_path(self) -> Path:
        return self.path / BASIS_FILE

    def basis(self) -> Basis:
        """The basis fitted by ``analyze hidden`` on this folder's data."""
        if not self.basis_path.is_file():
            raise ProclabError(
                f"analysis folder {str(self.path)!r} has no basis yet; run `proclab analyze hidden` first"
            )
        return Basis.load(self.basis_path)

    def optional_basis(self, needed: bool) -> tuple[Basis | None, str | None]:
        """The basis and the activation it was fitted on, or (None, None) when the folder has none and
        none is ``needed`` (a needed but missing basis is :meth:`basis`'s error)."""
        if self.basis_path.is_file() or needed:
            return self.basis(), self.inputs.get("activation")
        return None, None


def clear_previous(out: Path) -> Path:
    """Remove a previous run's store, strips and videos from ``out`` (a store would otherwise grow)."""
    for sub in ("store.zarr", "strips", "videos"):
        if (out / sub).exists():
            shutil.rmtree(out / sub)
    return out
