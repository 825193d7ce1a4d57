"""A level as an object: generated from a seed or read from a file, edited, looked at, and played.

Level counterfactuals are how a researcher asks what an agent pursues: the same level with the cheese
removed, moved or doubled, played beside the original. :class:`Level` holds one game state
(procgen's bytes) with its game and mode; every edit returns a new level (the original is kept), and
:func:`proclab.rollout` plays a list of levels, each episode starting from one of them::

    base = Level.generate("maze", 7)
    free = base.positions("space")  # the open cells' centres
    variants = [base, base.remove("cheese"), base.move("cheese", tuple(free[-1]))]
    ro = proclab.rollout(agent, levels=variants, episodes=3)

The edits are those of ``proclab level edit`` (:mod:`proclab.envs.state`: kinds are names of the
game's glossary, positions world units with one unit per cell, x right and y up); each edited state is
played once in a real procgen env when made, so a level procgen refuses is refused here, in one line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.games import check_game
from proclab.envs.rules import parse_rule
from proclab.envs.state import (
    GameState,
    add_entity,
    check_open,
    glossary,
    move_agent,
    move_entity,
    parse_state,
    positions,
    remove_entities,
    serialize_state,
)
from proclab.errors import ProclabError
from proclab.levels.file import LevelState, LevelStates, level_states, read_level_states, write_level_states
from proclab.levels.picture import level_figure

if TYPE_CHECKING:
    from proclab.io.drawing import Figure

REPR_KINDS = 4  # kinds a level's one-line repr counts


def env_config(game: str, mode: str, split: str = "0:1") -> EnvConfig:
    """A one-env config of ``game``/``mode`` with procgen's default drawing options."""
    return EnvConfig(game=(game,), mode=mode, num_envs=1, split=split, num_threads=1)


def generate_level(game: str, mode: str, level_seed: int) -> LevelState:
    """The first state of level ``level_seed`` of ``game`` in ``mode``, as procgen starts it: a one-env
    vector env on the one-level split ``SEED:1`` is created and its first state taken, so the level is
    exactly the one ``eval`` or ``train`` plays for that seed (procgen's default options: backgrounds on,
    agent centred)."""
    check_game(game, mode)
    if not 0 <= level_seed < 2**31:
        raise ProclabError(f"--level-seed must be in [0, 2^31), got {level_seed}")
    with ProcgenVecEnv(env_config(game, mode, f"{level_seed}:1")) as env:
        _, info = env.reset()
        data = env.slot_state(0)
        seed = int(info["level_seed"][0])
    return LevelState(data, seed, f"generated: {game} {mode} level {seed}")


def play_frames(data: bytes, game: str, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """What procgen draws for state ``data``: the agent's ``(64, 64, 3)`` view and its ``(512, 512, 3)``
    rendering. Setting the state into a real env also proves procgen accepts the bytes."""
    with ProcgenVecEnv(env_config(game, mode), render_human=True) as env:
        env.reset()
        obs, info = env.restart_slots({0: data})
        return obs[0].transpose(1, 2, 0).copy(), info["human"][0].copy()


@dataclass(frozen=True)
class Level:
    """One level: its state (procgen's bytes, the level seed it came from, a note of its edits), its game
    and mode, and where it came from. A notebook shows it as its picture (:meth:`show`); its repr is one line."""

    state: LevelState
    game: str
    mode: str
    source: str

    # -- making one --------------------------------------------------------------------------------
    @classmethod
    def generate(cls, game: str, level_seed: int, mode: str = "easy") -> Level:
        """The level procgen plays for ``level_seed`` (as ``eval`` and ``train`` start it)."""
        return cls(generate_level(game, mode, level_seed), game, mode, f"{game} {mode} level {level_seed}")

    @classmethod
    def read(cls, path: str | Path, index: int = 0) -> Level:
        """State ``index`` of a level-state file (``proclab level edit`` / ``level export`` write them)."""
        levels = read_level_states(path)
        n = len(levels)
        if not -n <= index < n:
            raise ProclabError(f"--index {index} is outside {str(path)!r}, which holds {n} state(s)")
        i = int(np.arange(n)[index])
        return cls(levels.states[i], levels.game, levels.mode, f"{path} state {i}")

    # -- reading it --------------------------------------------------------------------------------
    @property
    def parsed(self) -> GameState:
        """The game state as data (entities, grid, the game's own fields)."""
        return parse_state(self.state.data)

    @property
    def level_seed(self) -> int:
        return self.state.level_seed

    def positions(self, kind: str) -> np.ndarray:
        """World centres ``(n, 2)`` of every ``kind`` (an entity or cell kind of the game, or ``agent``)."""
        glossary(self.game).type_of(kind)
        return positions(self.parsed, kind)

    def frames(self) -> tuple[np.ndarray, np.ndarray]:
        """What procgen draws of the level's first step: the agent's ``(64, 64, 3)`` view and the
        ``(512, 512, 3)`` rendering."""
        return play_frames(self.state.data, self.game, self.mode)

    def show(self) -> Figure:
        """procgen's view of the level with its entities marked, beside a map of the whole level (a figure)."""
        return level_figure(self.parsed, self.frames()[1], self.describe())

    def describe(self) -> str:
        return self.state.note or self.source

    def _repr_png_(self) -> bytes:
        """The picture of :meth:`show`, so that a level a notebook cell ends with is shown."""
        return self.show()._repr_png_()

    def __repr__(self) -> str:
        """One line: game, mode, level seed and the counts of its kinds (goal first), not the state's bytes."""
        state = self.parsed
        kinds = Counter(e.kind for e in state.entities if not e.use_abs_coords)
        goal = glossary(self.game).goal
        counts = {goal: len(positions(state, goal))} if goal is not None else {}
        counts |= {kind: n for kind, n in kinds.most_common() if kind != goal}
        shown = [f"{n} {kind}" for kind, n in list(counts.items())[:REPR_KINDS]]
        more = f" and {len(counts) - REPR_KINDS} more kinds" if len(counts) > REPR_KINDS else ""
        return f"<Level {self.game} {self.mode}, level seed {self.level_seed}: {', '.join(shown)}{more}>"

    # -- editing it --------------------------------------------------------------------------------
    def remove(self, kind: str, near: tuple[float, float] | None = None) -> Level:
        """Without every ``kind`` (or only the one nearest to ``near``)."""
        glossary(self.game).type_of(kind)
        where = None
        if near is not None:
            target = self._nearest(kind, near)
            where = lambda x, y: (x, y) == (target[0], target[1])  # noqa: E731
        return self._edited(lambda s: remove_entities(s, kind, where=where), f"remove {kind}")

    def move(self, kind: str, to: tuple[float, float], index: int = 0) -> Level:
        """With the ``index``-th ``kind`` (as :meth:`positions` lists them) moved so its centre is ``to``
        (refused onto a wall)."""
        glossary(self.game).type_of(kind)
        check_open(self.parsed, to, kind)
        return self._edited(lambda s: move_entity(s, kind, to, index=index), f"move {kind}#{index} to {to}")

    def add(self, kind: str, at: tuple[float, float]) -> Level:
        """With one more ``kind`` centred at ``at`` (a cell kind fills the cell under it; refused on a wall)."""
        glossary(self.game).type_of(kind)
        check_open(self.parsed, at, kind)
        return self._edited(lambda s: add_entity(s, kind, at), f"add {kind} at {at}")

    def with_agent_at(self, at: tuple[float, float]) -> Level:
        """With the agent's centre at ``at`` (refused in a wall)."""
        check_open(self.parsed, at, "agent")
        return self._edited(lambda s: move_agent(s, at), f"agent to {at}")

    def with_rule(self, rule: str) -> Level:
        """As the level rule ``rule`` edits it at an episode start (:mod:`proclab.envs.rules`, e.g.
        ``"coin-moved:place=floor"``): the same edit train, eval and record play for this level seed."""
        parsed = parse_rule(rule)
        return self._edited(lambda s: parsed.apply(s, self.level_seed), parsed.text)

    def _nearest(self, kind: str, xy: tuple[float, float]) -> np.ndarray:
        found = self.positions(kind)
        if len(found) == 0:
            raise ProclabError(f"the level has no {kind!r}")
        return found[int(np.argmin(np.hypot(found[:, 0] - xy[0], found[:, 1] - xy[1])))]

    def _edited(self, edit: Callable[[GameState], GameState], note: str) -> Level:
        data = serialize_state(edit(self.parsed))
        play_frames(data, self.game, self.mode)  # procgen must accept the edited bytes
        done = (
            f"{self.state.note}; {note}" if self.state.note and "generated" not in self.state.note else note
        )
        return replace(self, state=LevelState(data, self.state.level_seed, done))


def as_level_states(levels: Sequence[Level]) -> LevelStates:
    """Levels of one game and mode as the content of a level-state file (what a levels env plays)."""
    if not levels:
        raise ProclabError("no levels given")
    games = {(lv.game, lv.mode) for lv in levels}
    if len(games) > 1:
        raise ProclabError(f"levels of one game and mode play together; got {sorted(games)}")
    return level_states(levels[0].game, levels[0].mode, [lv.state for lv in levels])


def write_levels(path: str | Path, levels: Sequence[Level], overwrite: bool = False) -> Path:
    """Write ``levels`` as a level-state file (``proclab record --levels-from``, ``level show`` read it)."""
    return write_level_states(path, as_level_states(levels), overwrite=overwrite)
