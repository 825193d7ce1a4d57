"""procgen 0.10.7 through gym3 (the ``procgen2`` wheel on Python 3.11, ``procgen-mirror`` on 3.12).

procgen is imported quietly, and the few procgen internals proclab relies on are kept here.

procgen imports the unmaintained ``gym`` package, which prints a multi-line deprecation
banner to stderr on import. proclab users never touch ``gym``, so the banner is removed; any
*other* output produced during the import is passed through unchanged.

The vector env reads procgen's output buffers directly (``observe`` without the per-env info
dicts of ``get_info``), which is what keeps proclab at raw-procgen speed. Those buffer
attributes belong to gym3's ``CEnv`` (pinned at 0.3.3 through procgen2 0.10.7); every access
is in :class:`ProcgenBackend` so that one place changes if they ever do.
"""

from __future__ import annotations

import contextlib
import io
import sys
import warnings
from importlib.metadata import PackageNotFoundError, version

import numpy as np


def _import_procgen():
    try:
        from gym_notices.notices import notices as banners  # lazy: comes with procgen, an optional backend
    except ImportError:  # pragma: no cover - gym_notices is a procgen dependency
        banners = {}
    captured = io.StringIO()
    with contextlib.redirect_stderr(captured), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ResourceWarning)  # procgen's unclosed version.txt
        from procgen import ProcgenGym3Env  # lazy: an optional backend, only this one needs it
    text = captured.getvalue()
    for banner in set(banners.values()):
        text = text.replace(banner + "\n", "").replace(banner, "")
    if text.strip():
        sys.stderr.write(text)
    return ProcgenGym3Env


def _distribution() -> str:
    """Which wheel provides ``procgen`` here, with its version (both install the same module)."""
    for name in ("procgen2", "procgen-mirror", "procgen"):
        with contextlib.suppress(PackageNotFoundError):
            return f"{name} {version(name)}"
    return "procgen"  # pragma: no cover - a source build without metadata


ProcgenGym3Env = _import_procgen()
MAX_STATE_BYTES = 2**20  # procgen's MAX_STATE_SIZE: the largest state its get_state writes
NAME = f"{_distribution()} (gym3)"


class ProcgenBackend:
    """One procgen ``ProcgenGym3Env`` (one game, ``num`` envs) with zero-copy buffer access."""

    def __init__(self, num: int, game: str, **options):
        self.env = ProcgenGym3Env(num=num, env_name=game, **options)
        self.num = num
        self._state_buf = None

    def act(self, actions: np.ndarray) -> None:
        self.env.act(actions)

    def observe(self):
        """Fill procgen's buffers; return views ``(rgb HWC, reward, first, info dict)``.

        The arrays are procgen's own buffers: valid until the next :meth:`act`; copy to keep.
        """
        env = self.env
        env._c_lib.libenv_observe(env._c_env)
        return env._ob["rgb"], env._rew, env._first, env._info

    def get_state(self) -> list[bytes]:
        return self.env.get_state()

    def get_slot_state(self, index: int) -> bytes:
        """One env's state, as :meth:`get_state`, through one buffer kept between calls (procgen's own
        allocates and zeroes a megabyte per call, which costs as much as serializing a small game)."""
        if self._state_buf is None:
            self._state_buf = self.env._ffi.new(f"char[{MAX_STATE_BYTES}]")
        buf = self._state_buf
        return bytes(
            self.env._ffi.buffer(buf, self.env.call_c_func("get_state", index, buf, MAX_STATE_BYTES))
        )

    def get_slot_states(self) -> list[bytes]:
        """Every env's state, as :meth:`get_slot_state`."""
        return [self.get_slot_state(i) for i in range(self.num)]

    def set_state(self, states: list[bytes]) -> None:
        self.env.set_state(states)

    def set_slot_state(self, index: int, state: bytes) -> None:
        """Restore one env of the vector (procgen's own ``set_state`` restores all of them)."""
        self.env.call_c_func("set_state", index, state, len(state))

    def close(self) -> None:
        self.env.close()
