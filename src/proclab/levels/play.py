"""``--levels-from FILE``: a vector env whose every episode starts from a state of a level-state file.

**Which state each episode plays.** Episode ``k`` (0, 1, ...) of env slot ``i`` of an ``N``-slot env
starts from state ``(i + k * N) mod n`` of the file's ``n`` states. proclab's quotas give the first
slots the extra episodes, so a run of exactly ``n`` episodes plays every state once, and a longer
run cycles through them in order (``2n`` episodes: each twice). Procgen continues from a state
exactly as from the original level (its random generators are part of the state), so with the
same actions an episode replays identically.

**Options.** A state carries the procgen options of the env it was taken from (backgrounds,
monochrome assets, ...). They are replaced by the playing env's own, so a level saved from a
default env is drawn as an agent trained without backgrounds saw its levels; the level's content
(grid, entities, the game's own fields) is kept as it is. The distribution mode cannot be
replaced: the file's mode must be the env's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.state import parse_state, serialize_state
from proclab.errors import ProclabError
from proclab.levels.file import LevelState, LevelStates

RENDER_OPTIONS = (
    "paint_vel_info",
    "use_generated_assets",
    "use_monochrome_assets",
    "restrict_themes",
    "use_backgrounds",
    "center_agent",
    "use_sequential_levels",
)
"""Header fields (procgen's names) that say how a level is drawn and continued, not what it holds."""


def render_options(reference: bytes) -> dict:
    """The :data:`RENDER_OPTIONS` of state ``reference`` (a state of the playing env)."""
    header = parse_state(reference).header
    return {name: getattr(header, name) for name in RENDER_OPTIONS}


def with_options(data: bytes, options: dict) -> bytes:
    """State ``data`` drawn with ``options`` (:func:`render_options`); unchanged bytes when it already is."""
    state = parse_state(data)
    if all(getattr(state.header, name) == value for name, value in options.items()):
        return data
    return serialize_state(dataclasses.replace(state, header=dataclasses.replace(state.header, **options)))


def with_options_of(data: bytes, reference: bytes) -> bytes:
    """State ``data`` with the :data:`RENDER_OPTIONS` of state ``reference`` (a state of the playing env)."""
    return with_options(data, render_options(reference))


class GeneratedLevels(Sequence[LevelState]):
    """Chosen level seeds as ``config``'s env starts them (its game, mode, drawing options and level rule),
    each generated when first played: to play each level of a list exactly once (procgen draws the levels of
    a split with replacement), however long the list. A one-env env per level, a few ms each; the last
    :data:`KEPT` are kept (a slot asks again for nothing it played)."""

    KEPT = 64

    def __init__(self, config: EnvConfig, seeds: Sequence[int] | np.ndarray):
        (self.game,) = config.games()
        self.config, self.mode, self.seeds = config, config.mode, np.asarray(seeds, np.int64)
        self._kept: dict[int, LevelState] = {}

    @property
    def states(self) -> GeneratedLevels:
        return self

    def __len__(self) -> int:
        return len(self.seeds)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        seed = int(self.seeds[i])
        if seed not in self._kept:
            one = dataclasses.replace(self.config, num_envs=1, num_threads=1, split=f"{seed}:1")
            with ProcgenVecEnv(one) as env:
                env.reset()
                self._kept[seed] = LevelState(env.slot_state(0), seed, f"generated: level {seed}")
            while len(self._kept) > self.KEPT:
                self._kept.pop(next(iter(self._kept)))
        return self._kept[seed]


def check_levels_fit(levels: LevelStates, games: tuple[str, ...], mode: str, source: str) -> None:
    """Refuse, in one line, levels of another game or mode than an agent plays."""
    if tuple(games) != (levels.game,):
        raise ProclabError(f"{source} holds {levels.game} levels; the agent plays {', '.join(games)}")
    if mode != levels.mode:
        raise ProclabError(f"{source} holds {levels.mode}-mode levels; the agent plays {mode} mode")


class LevelsEnv:
    """A :class:`~proclab.envs.ProcgenVecEnv` restarted from a file's states at every episode start.

    It behaves as the env it wraps (same ``step``/``reset`` results and attributes), except that each
    episode starts from the state chosen as the module docstring says; ``info["level_seed"]`` is the
    seed of the level a state was generated from. A file's levels play as they are: the wrapped env's
    level rule (:mod:`proclab.envs.rules`), which edits generated levels, is switched off.
    """

    def __init__(
        self, env: ProcgenVecEnv, levels: LevelStates | GeneratedLevels, source: str = "level-state file"
    ):
        check_levels_fit(levels, tuple(env.games), env.config.mode, source)
        env.rule = None
        self.env, self.levels = env, levels
        self._options: dict | None = None  # the playing env's drawing options
        self._played = np.zeros(env.num_envs, np.int64)

    def __getattr__(self, name):
        return getattr(self.env, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.env.close()

    def state_index(self, slot: int) -> int:
        """The file's state that slot ``slot``'s current episode started from."""
        return int((slot + self._played[slot] * self.env.num_envs) % len(self.levels))

    def _start(self, slot: int) -> bytes:
        """The state slot ``slot``'s current episode starts from, drawn with the playing env's options."""
        return with_options(self.levels.states[self.state_index(slot)].data, self._options)

    def reset(self) -> tuple[np.ndarray, dict]:
        self.env.reset()
        if self._options is None:  # the env's own options, read once from a state it made
            self._options = render_options(self.env.slot_state(0))
        self._played[:] = 0
        return self.env.restart_slots({i: self._start(i) for i in range(self.env.num_envs)})

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        done = np.flatnonzero(terminated | truncated)
        if len(done):
            self._played[done] += 1
            obs, fresh = self.env.restart_slots({int(i): self._start(int(i)) for i in done})
            info.update(fresh)
        return obs, reward, terminated, truncated, info
