"""procgen through ``procgen-gym`` (the only procgen wheel for Python 3.13).

procgen-gym builds procgen's C++ sources with Qt 5.15 and loads them through its own ctypes
``CLibenv`` instead of gym3. Its ``ProcgenVecEnv`` is a Gymnasium vector env whose ``step``
copies every buffer; proclab instead acts and observes on the library directly and reads its
numpy buffers in place, as the gym3 backend does, so both builds run at the C library's speed.

Two of its habits are absorbed here:

* options are converted to C by their Python type: a ``numpy.bool_`` or ``numpy.int64`` raises,
  and an ``int`` where the game expects a flag (or a ``bool`` where it expects a count) ends the
  whole process from inside the C library (``fatal: invalid dtype for option ...``), so every
  option is cast to the plain Python type procgen expects first;
* ``first`` is a uint8 buffer; it is returned as a bool view (same bytes, no copy).
"""

from __future__ import annotations

import ctypes
from importlib.metadata import version

import numpy as np
from procgen_gym import ProcgenVecEnv

MAX_STATE_BYTES = 2**20  # procgen's MAX_STATE_SIZE: the largest state its get_state writes
NAME = f"procgen-gym {version('procgen-gym')} (gymnasium)"

_FLAGS = {
    "center_agent",
    "use_backgrounds",
    "use_monochrome_assets",
    "restrict_themes",
    "use_generated_assets",
    "paint_vel_info",
    "use_sequential_levels",
    "debug",
}
_INTEGERS = {"rand_seed", "num_levels", "start_level", "num_threads", "debug_mode"}


def _plain(options: dict) -> dict:
    """The options with flags as ``bool`` and counts/seeds as ``int`` (see the module docstring)."""
    out = {}
    for key, value in options.items():
        if key in _FLAGS:
            value = bool(value)
        elif key in _INTEGERS:
            value = int(value)
        out[key] = value
    return out


class ProcgenBackend:
    """One procgen-gym ``ProcgenVecEnv`` (one game, ``num`` envs) with zero-copy buffer access."""

    def __init__(self, num: int, game: str, **options):
        self.env = ProcgenVecEnv(num_envs=int(num), env_name=game, **_plain(options))
        self._lib = self.env._clib  # the ctypes library and its numpy buffers
        self._state_buf = None
        self.num = num

    def act(self, actions: np.ndarray) -> None:
        self._lib.act(actions)

    def observe(self):
        """Fill the library's buffers; return views ``(rgb HWC, reward, first, info dict)``.

        The arrays are the library's own buffers: valid until the next :meth:`act`; copy to keep.
        """
        lib = self._lib
        lib._lib.libenv_observe(lib._handle)
        return (
            lib.get_ob_bufs()["rgb"],
            lib.get_reward_buf(),
            lib.get_first_buf().view(bool),
            lib.get_info_bufs(),
        )

    def get_state(self) -> list[bytes]:
        return self.env.get_state()

    def get_slot_state(self, index: int) -> bytes:
        """One env's state, as :meth:`get_state`, through one buffer kept between calls: this build's own
        ``get_state`` allocates and zeroes a megabyte per call and copies all of it to slice the state."""
        if self._state_buf is None:
            self._state_buf = ctypes.create_string_buffer(MAX_STATE_BYTES)
        n = self._lib.call_c_func("get_state", int(index), self._state_buf, MAX_STATE_BYTES)
        return ctypes.string_at(self._state_buf, n)

    def get_slot_states(self) -> list[bytes]:
        """Every env's state, as :meth:`get_slot_state`: the call the ground-truth recorder makes."""
        return [self.get_slot_state(i) for i in range(self.num)]

    def set_state(self, states: list[bytes]) -> None:
        self.env.set_state(list(states))

    def set_slot_state(self, index: int, state: bytes) -> None:
        """Restore one env of the vector (procgen-gym's own ``set_state`` restores all of them)."""
        self._lib.call_c_func("set_state", int(index), state, len(state))

    def close(self) -> None:
        self.env.close()
