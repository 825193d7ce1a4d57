"""The analysis folder (``--out ANALYSIS``) that every ``proclab analyze`` command shares.

``ANALYSIS/analysis.json`` records the *inputs* once (real store ``data``, sample store
``samples``, world model ``wm``, agent ``checkpoint``, the ``activation`` analysed) and, per
command, its arguments, wall time and output files. The basis fitted by ``analyze hidden``
lives beside it (``basis.npz``) and every later command reuses it, so all analyses of a
folder describe one set of states in one coordinate system. A command that names another
input than the one recorded stops with a one-line error *before* it writes anything: mixing
two stores (or two activations) in one folder would silently project states onto a basis
fitted on different data. Each command writes into its own subfolder (``command_dir``).

**Whole or not at all.** A command writes its outputs into a hidden staging folder
(``ANALYSIS/.outputs.tmp-PID-XXXXXXXX/``) and :meth:`Workspace.record_command` publishes them at
its end: it first withdraws the command's old record from ``analysis.json``, then renames each
staged folder (and ``basis.npz``) over the previous run's, then records the command. So a
command killed at any instant (even ``kill -9``) leaves the previous complete outputs, or none
recorded, never a mix shown as finished; a full disk or an error removes the staging folder
(:func:`discard_staged`), and the staging folders of killed processes are swept by the next
command on the folder. Running the command again gives the outputs of an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from proclab.errors import ProclabError
from proclab.interpret.bases.pca_ica import Basis
from proclab.io.files import disk_errors, publish, read_json, remove, sweep_temporaries, temporary_sibling
from proclab.io.run_dirs import write_json_atomic

ANALYSIS_FILE = "analysis.json"
BASIS_FILE = "basis.npz"
FORMAT = "proclab-analysis"
INPUTS = ("data", "samples", "wm", "checkpoint", "activation")
"""The inputs a folder records: what its states and basis come from."""
STAGING = "outputs"
"""Staging folders are ``ANALYSIS/.outputs.tmp-PID-XXXXXXXX``."""


def _canonical(value: Any) -> Any:
    """Paths are recorded absolute, so a folder means the same thing from any directory."""
    return str(Path(value).resolve()) if isinstance(value, Path) else value


class Workspace:
    """One analysis folder: its recorded inputs, per-command records, subfolders and the basis."""

    def __init__(self, path: Path, record: dict):
        self.path = path
        self._record = record
        self._pending: dict[str, Any] = {}
        self._staging: Path | None = None
        self._staged: list[str] = []

    @classmethod
    def open(cls, path: str | Path, create: bool = True) -> Workspace:
        path = Path(path)
        file = path / ANALYSIS_FILE
        if path.exists() and not path.is_dir():
            raise ProclabError(f"analysis folder {str(path)!r} is a file; give a folder for --out")
        if file.is_file():
            record = read_json(file, "analysis record")
            if not isinstance(record, dict) or record.get("format") != FORMAT:
                raise ProclabError(f"{str(file)!r} is not a proclab analysis record")
            if not isinstance(record.get("inputs"), dict) or not isinstance(record.get("commands"), dict):
                raise ProclabError(f"analysis record {str(file)!r} is corrupt (no inputs or commands)")
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
        """The folder for command ``name``'s outputs: a fresh staging folder (created) that
        :meth:`record_command` publishes as ``ANALYSIS/name``, replacing the previous run's."""
        folder = self.stage(name)
        with disk_errors(folder, "analysis outputs"):
            folder.mkdir(parents=True, exist_ok=True)
        return folder

    def stage(self, name: str) -> Path:
        """Where to write ``ANALYSIS/name`` (a file or a folder) until :meth:`record_command` publishes it."""
        if self._staging is None:
            with disk_errors(self.path, "analysis folder"):
                self.path.mkdir(parents=True, exist_ok=True)
            sweep_temporaries(self.path)
            self._staging = temporary_sibling(self.path / STAGING)
        if name not in self._staged:
            self._staged.append(name)
        (self._staging / name).parent.mkdir(parents=True, exist_ok=True)
        return self._staging / name

    def final(self, path: str | Path) -> Path:
        """Where a staged ``path`` lives once published (other paths unchanged)."""
        return published_path(Path(path))

    def _publish(self, name: str) -> None:
        """Withdraw ``name``'s old record, then rename every staged output over the previous one."""
        if not self._staged:
            return
        if self._record["commands"].pop(name, None) is not None:
            write_json_atomic(self.path / ANALYSIS_FILE, self._record)
        with disk_errors(self.path, "analysis outputs"):
            for rel in self._staged:
                (self.path / rel).parent.mkdir(parents=True, exist_ok=True)
                publish(self._staging / rel, self.path / rel)
        remove(self._staging)
        self._staging, self._staged = None, []

    def record_command(self, name: str, args: dict, outputs: list[str], seconds: float) -> None:
        """Publish the command's staged outputs, then write its record (and any newly given inputs)
        to ``analysis.json``."""
        outputs = [str(self.final(o)) for o in outputs]
        self._publish(name)
        self.path.mkdir(parents=True, exist_ok=True)
        self._record["inputs"] = self.inputs
        self._pending = {}
        self._record["commands"][name] = {
            "args": {k: _canonical(v) for k, v in args.items()},
            "seconds": round(float(seconds), 3),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "outputs": outputs,
        }
        write_json_atomic(self.path / ANALYSIS_FILE, self._record)

    def finish(self, name: str, args: Any, files: list[Path], summary: dict, start: float) -> Path:
        """Write the command's ``summary.json`` (with its wall time since ``start``, a ``perf_counter``
        value), publish and record the command; returns its folder."""
        out = self.command_dir(name)
        seconds = time.perf_counter() - start
        write_json_atomic(out / "summary.json", {**summary, "wall_seconds": round(seconds, 3)})
        files = [self.final(f) for f in [*files, out / "summary.json"]]
        args = dataclasses.asdict(args) if dataclasses.is_dataclass(args) else dict(args)
        self.record_command(name, args, [str(f.relative_to(self.path)) for f in files], seconds)
        return self.path / name

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

    def activation(self) -> str:
        """The activation (store field or hook point) that ``analyze hidden`` analysed in this folder."""
        source = self.inputs.get("activation")
        if source is None:
            raise ProclabError(
                f"analysis folder {str(self.path)!r} records no activation; run `proclab analyze hidden` on it"
            )
        return source

    def optional_basis(self, needed: bool) -> tuple[Basis | None, str | None]:
        """The basis and the activation it was fitted on, or (None, None) when the folder has none and
        none is ``needed`` (a needed but missing basis is :meth:`basis`'s error)."""
        if self.basis_path.is_file() or needed:
            return self.basis(), self.inputs.get("activation")
        return None, None


def published_path(path: Path) -> Path:
    """Where a file written into a staging folder will be once published (others unchanged)."""
    parts = [p for p in path.parts if not (p.startswith(f".{STAGING}.tmp-"))]
    return Path(*parts)


def discard_staged(folder: str | Path) -> None:
    """Remove the unpublished staging folders this process left in the analysis ``folder`` (a
    command that failed, e.g. on a full disk); published outputs are untouched."""
    mine = f".{STAGING}.tmp-{os.getpid()}-"
    if Path(folder).is_dir():
        for entry in Path(folder).iterdir():
            if entry.name.startswith(mine):
                remove(entry)
