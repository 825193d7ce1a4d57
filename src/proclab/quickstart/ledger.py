"""The quickstart's ledger: which stages finished in an output folder, with their outputs and times.

``OUT/quickstart.json`` is rewritten (atomically) after every stage, so a crash or Ctrl-C
loses only the stage that was running: the next run with the same settings continues after the
last finished stage, and ``--from STAGE`` reruns from any stage whose predecessors finished.
A run with other settings (budget, game, seed, precision, ...) starts over, because the
finished stages' outputs would not be what those settings make.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from proclab.errors import ProclabError
from proclab.io.files import read_json
from proclab.io.run_dirs import write_json_atomic

LEDGER = "quickstart.json"


class Ledger:
    """Finished stages (name -> ``{"seconds", "outputs", "finished"}``) under fixed settings."""

    def __init__(self, out: Path, settings: dict[str, Any]):
        self.path = Path(out) / LEDGER
        self.settings = settings
        self.stages: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            saved = read_json(self.path, "quickstart ledger")
            if not isinstance(saved, dict):
                raise ProclabError(
                    f"quickstart ledger {str(self.path)!r} is corrupt; delete it to start over"
                )
            if saved.get("settings") == settings:
                self.stages = dict(saved.get("stages", {}))

    def first_to_run(self, order: list[str], start: str | None) -> int:
        """Index in ``order`` of the first stage to run: ``start``, else the first unfinished one."""
        if start is None:
            return next((i for i, name in enumerate(order) if name not in self.stages), len(order))
        index = order.index(start)
        missing = [name for name in order[:index] if name not in self.stages]
        if missing:
            raise ProclabError(
                f"cannot start from {start!r}: stage {missing[0]!r} has not finished in {str(self.path.parent)!r} "
                f"with these settings; run without --from (or --from {missing[0]})"
            )
        return index

    def forget_from(self, order: list[str], index: int) -> None:
        """Drop the records of ``order[index:]`` (they are about to be redone)."""
        for name in order[index:]:
            self.stages.pop(name, None)
        self.save()

    def finish(self, name: str, seconds: float, outputs: dict[str, Any]) -> None:
        self.stages[name] = {"seconds": round(seconds, 2), "outputs": outputs, "finished": time.time()}
        self.save()

    def outputs(self, name: str) -> dict[str, Any]:
        return self.stages[name]["outputs"]

    def seconds(self) -> dict[str, float]:
        return {name: record["seconds"] for name, record in self.stages.items()}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, {"settings": self.settings, "stages": self.stages})
