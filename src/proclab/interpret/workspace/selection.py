"""Which samples or episodes a command reads: ``0:100,250`` style selections."""

from __future__ import annotations

import re

from proclab.errors import ProclabError


def parse_ids(text: str, count: int, what: str = "sample") -> list[int]:
    """``"0:100,250"`` -> ``[0, ..., 99, 250]``: comma-separated ids and ``lo:hi`` ranges (``hi``
    excluded, as in Python; ``lo:`` runs to the end). Every id must be below ``count``."""
    ids: list[int] = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?::(\d*))?", part)
        if not m:
            raise ProclabError(
                f"bad {what} selection {part!r} in {text!r}; write ids and ranges like 0:100,250"
            )
        lo = int(m.group(1))
        hi = (count if m.group(2) == "" else int(m.group(2))) if m.group(2) is not None else lo + 1
        if hi <= lo:
            raise ProclabError(f"empty {what} range {part!r}; write lo:hi with hi > lo")
        if hi > count:
            raise ProclabError(
                f"{what} range {part!r} goes past the last {what} ({count - 1}); the store has {count}"
            )
        ids.extend(range(lo, hi))
    return list(dict.fromkeys(ids))
