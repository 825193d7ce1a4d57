"""User-facing errors.

A :class:`ProclabError` means *the user asked for something invalid* (an unknown game, a bad
split, a missing or corrupt file, ...). Its message is one line that names the bad value and
what would be valid. The CLI prints it without a traceback and exits with status 2. Bugs in
proclab itself still raise ordinary exceptions, so that they are reported with a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ProclabError(Exception):
    """A mistake in the user's input; the message is shown as a single line."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))  # keep it on one line


class ProclabWarning(UserWarning):
    """Something the user asked for runs, but probably not as they meant it (e.g. "held-out" levels that an
    agent trained on); one line saying what and what to do instead."""


class NothingToDo(Exception):
    """The command's work is already done (e.g. ``--resume`` of a finished run).

    The CLI prints the message, which says so and how to ask for more, and exits with status 0.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


def unknown_choice(kind: str, value: str, valid: Iterable[str]) -> ProclabError:
    """Error for a name that is not one of ``valid``, suggesting the closest spelling."""
    valid = sorted(valid)
    close = difflib.get_close_matches(str(value), valid, n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ProclabError(f"unknown {kind} {value!r}.{hint} Valid: {', '.join(valid)}.")
