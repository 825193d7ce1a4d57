"""Procgen through whichever build this Python has, behind one small interface.

The same C++ game code (procgen 0.10.7) is installed as one of two Python packages, chosen by
pyproject.toml's markers:

* ``procgen`` (wheels ``procgen2`` for 3.11, ``procgen-mirror`` for 3.12), driven through gym3's
  ``CEnv``: :mod:`proclab.envs._backend_gym3`;
* ``procgen_gym`` (wheel ``procgen-gym`` for 3.13), a Gymnasium port with its own ctypes loader:
  :mod:`proclab.envs._backend_gymnasium`.

Both expose :class:`ProcgenBackend` (``act``, ``observe``, ``get_state``, ``set_state``,
``set_slot_state``, ``close``) and ``NAME``; nothing else in proclab touches procgen. How far
the two builds agree (rewards, level seeds, states, pixels) is measured by
``benchmarks/backend_fidelity.py`` (docs/install.md).
"""

from __future__ import annotations

import importlib.util

from proclab.errors import ProclabError

if importlib.util.find_spec("procgen") is not None:
    from proclab.envs._backend_gym3 import NAME, ProcgenBackend
elif importlib.util.find_spec("procgen_gym") is not None:
    from proclab.envs._backend_gymnasium import NAME, ProcgenBackend
else:  # pragma: no cover - pip installs one of them with proclab
    raise ProclabError(
        "no procgen build is installed: reinstall proclab (make setup) so that pip picks procgen2 (3.11), "
        "procgen-mirror (3.12) or procgen-gym (3.13)"
    )

__all__ = ["NAME", "ProcgenBackend"]
