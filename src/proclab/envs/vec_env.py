"""A vectorised Procgen environment with a gymnasium-style API, one game or many.

``step(actions) -> obs, reward, terminated, truncated, info`` where

* ``obs``: uint8 ``(N, 3, 64, 64)``. It is a channels-first *view* of a channels-last buffer
  (no transpose copy), so ``torch.from_numpy(obs)`` is already a ``channels_last`` tensor, the
  fastest layout for the agents' convolutions.
* ``reward``: float32 ``(N,)``, the reward the action earned.
* ``terminated`` / ``truncated``: bool ``(N,)``. Procgen resets an env by itself when its episode
  ends, so ``obs[i]`` is then already the first frame of the next episode. An episode that hit
  Procgen's 1000-step time limit without completing its level is ``truncated``; every other end
  is ``terminated``.
* ``info``: arrays, never per-env dicts: ``level_seed (N,)`` of the level each returned
  observation belongs to, and ``episode``, a dict of ``(N,)`` arrays describing the episodes
  that ended at this step (``done`` mask, ``return``, ``length``, ``level_seed``,
  ``level_complete``). With ``render_human=True`` also ``human``: the 512x512 HWC frames.

``reward_rule`` (``end-pays``, ``corner-pays``; :mod:`proclab.envs.rewards`) pays a game's second goal instead
of its own, ending the episode there; ``level_complete`` then means the paid goal was reached. It is an argument
of the env, not a field of :class:`EnvConfig`: what pays is how an agent was trained (``TrainConfig.reward_rule``),
while an agent's ``EnvConfig`` is where analyses play it, under the game's own rules.

Multi-task: with games ``(g_0, ..., g_{G-1})`` env slot ``i`` plays ``g_{i mod G}`` (the
modern-srwm layout); ``game_index[i]`` says which. Each game is one procgen vector env.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from proclab.envs._procgen import ProcgenBackend
from proclab.envs.games import EPISODE_TIME_LIMIT, check_mode, resolve_games
from proclab.envs.levels import LevelSplit, parse_split
from proclab.envs.rewards import PaidGoal, check_reward_rule
from proclab.envs.rules import check_rule
from proclab.envs.state import parse_state, serialize_state
from proclab.errors import ProclabError

OBS_SHAPE = (3, 64, 64)


@dataclass(frozen=True)
class EnvConfig:
    """Procgen settings shared by every environment a run builds."""

    game: tuple[str, ...] = ("coinrun",)
    """Game, or several for multi-task (env slot i plays game i mod N); also the lists easy6, memory4, all16."""
    mode: str = "easy"
    """Distribution mode: easy, hard, extreme, memory or exploration (validity is per game)."""
    num_envs: int = 64
    """Parallel environments (for multi-task, split evenly over the games)."""
    split: str = "train"
    """Training levels: a named split (train, train-500, val, test1..3, all) or START:NUM."""
    use_backgrounds: bool = True
    """Draw the game backgrounds (interpreting-rl-behavior trains without them)."""
    paint_vel_info: bool = False
    """Paint the agent's velocity in the top-left corner of the frame."""
    center_agent: bool = True
    """Keep the agent centred (the default Procgen camera)."""
    use_sequential_levels: bool = False
    """Continue to the next level instead of ending the episode when a level is completed."""
    restrict_themes: bool = False
    """Use a single theme per game."""
    use_monochrome_assets: bool = False
    """Draw with monochrome rectangles instead of sprites."""
    num_threads: int = 4
    """Procgen's stepping threads per game."""
    level_rule: str = ""
    """Edit every level at its start by this rule (proclab.envs.rules: coin-moved[:percent=P,place=sections|floor,
    seed=S] for CoinRun, cheese-region[:size=R,seed=S] for Maze); empty: the levels as procgen makes them."""

    def games(self) -> tuple[str, ...]:
        return resolve_games(self.game, self.mode)


def _game_seed(seed: int, game_slot: int) -> int:
    return int(np.random.SeedSequence([seed, game_slot]).generate_state(1)[0] % 2**31)


class ProcgenVecEnv:
    """``num_envs`` Procgen environments over one or several games; see the module docstring."""

    def __init__(
        self,
        config: EnvConfig,
        seed: int = 0,
        *,
        num_envs: int | None = None,
        split: str | LevelSplit | None = None,
        render_human: bool = False,
        reward_rule: str = "",
    ):
        check_mode(config.mode)
        self.config = config
        self.games = config.games()
        self.split = parse_split(config.split if split is None else split)
        self.num_envs = config.num_envs if num_envs is None else num_envs
        self.seed = int(seed)
        self.render_human = render_human
        G = len(self.games)
        if self.num_envs < 1:
            raise ProclabError(f"num_envs={self.num_envs} is invalid: it must be at least 1.")
        if self.num_envs < G:
            raise ProclabError(
                f"num_envs={self.num_envs} is smaller than the {G} games "
                f"({', '.join(self.games)}); give at least one env per game."
            )
        self.game_index = np.arange(self.num_envs) % G
        self.rule = check_rule(config.level_rule, self.games)
        paid = check_reward_rule(reward_rule, self.games)
        self.paid = None if paid is None else PaidGoal(self.split, self.seed, self.num_envs)
        self._slots = [slice(g, None, G) for g in range(G)]
        self._backends: list[ProcgenBackend] = []
        self._ep_return = np.zeros(self.num_envs, np.float64)
        self._ep_length = np.zeros(self.num_envs, np.int64)

    # -- construction -------------------------------------------------------------------------
    def _procgen_options(self) -> dict:
        c = self.config
        options = dict(
            distribution_mode=c.mode,
            use_backgrounds=c.use_backgrounds,
            paint_vel_info=c.paint_vel_info,
            center_agent=c.center_agent,
            use_sequential_levels=c.use_sequential_levels,
            restrict_themes=c.restrict_themes,
            use_monochrome_assets=c.use_monochrome_assets,
            num_threads=c.num_threads,
        )
        if c.mode != "exploration":  # exploration mode fixes its single level itself
            options.update(num_levels=self.split.num, start_level=self.split.start)
        if self.render_human:
            options["render_mode"] = "rgb_array"
        return options

    def reset(self) -> tuple[np.ndarray, dict]:
        """(Re)create the environments from the seed; return the first observations."""
        self.close()
        options = self._procgen_options()
        self._backends = [
            ProcgenBackend(
                num=len(range(self.num_envs)[sl]), game=game, rand_seed=_game_seed(self.seed, g), **options
            )
            for g, (game, sl) in enumerate(zip(self.games, self._slots, strict=True))
        ]
        self._ep_return[:] = 0
        self._ep_length[:] = 0
        obs, _, _, info, _ = self._observe()
        if self.rule is not None:
            obs, info = self._apply_rule(np.arange(self.num_envs), obs, info)
        if self.paid is not None:
            for slot, state in enumerate(self.slot_states()):
                self.paid.start(slot, state)
        return obs, info

    def close(self) -> None:
        for backend in self._backends:
            backend.close()
        self._backends = []

    # -- stepping -----------------------------------------------------------------------------
    def step(self, actions) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        if not self._backends:
            raise RuntimeError("call reset() before step()")
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,):
            raise ValueError(f"expected actions of shape ({self.num_envs},), got {actions.shape}")
        actions = actions.astype(np.int32, copy=False)
        for backend, sl in zip(self._backends, self._slots, strict=True):
            backend.act(actions[sl])
        obs, reward, first, info, (prev_seed, prev_complete) = self._observe()
        game_ended = first
        if self.paid is not None:
            going = {int(i): self.slot_state(int(i)) for i in np.flatnonzero(~first)}
            reward, paid_end, prev_complete = self.paid.settle(reward, first, prev_complete, going)
            prev_seed = np.where(paid_end, info["level_seed"], prev_seed)
            first = first | paid_end

        self._ep_return += reward
        self._ep_length += 1
        length = self._ep_length.copy()
        complete = prev_complete & first
        truncated = game_ended & (length >= EPISODE_TIME_LIMIT) & ~complete
        info["episode"] = {
            "done": first.copy(),
            "return": np.where(first, self._ep_return, 0.0),
            "length": np.where(first, length, 0),
            "level_seed": np.where(first, prev_seed, -1),
            "level_complete": complete,
        }
        self._ep_return[first] = 0
        self._ep_length[first] = 0
        if self.paid is not None and (first & ~game_ended).any():
            obs, fresh = self._next_levels(np.flatnonzero(first & ~game_ended), going)
            info.update(fresh)
        if self.rule is not None and game_ended.any():
            obs, fresh = self._apply_rule(np.flatnonzero(game_ended), obs, info)
            info.update(fresh)
        if self.paid is not None:
            for slot in np.flatnonzero(first):
                self.paid.start(int(slot), self.slot_state(int(slot)))
        return obs, reward, first & ~truncated, truncated, info

    def _next_levels(self, slots: np.ndarray, ended: dict[int, bytes]) -> tuple[np.ndarray, dict]:
        """Start ``slots``, whose episodes the reward rule ended (``ended``: their states after the step), on their
        next levels (drawn by the rule, generated in a one-env procgen of this env's options, edited by the level
        rule)."""
        assert self.paid is not None
        states = {}
        for slot in slots.tolist():
            level = self.paid.next_level(slot)
            one = ProcgenVecEnv(
                replace(self.config, num_envs=1, num_threads=1, level_rule=""),
                seed=self.seed,
                split=LevelSplit(level, 1),
                render_human=self.render_human,
            )
            with one:
                one.reset()
                state = parse_state(one.slot_state(0))
            state = self.paid.continuing(state, parse_state(ended[slot]))
            if self.rule is not None:
                state = self.rule.apply(state, level)
            states[slot] = serialize_state(state)
        return self.restart_slots(states)

    def _apply_rule(self, slots: np.ndarray, obs: np.ndarray, info: dict) -> tuple[np.ndarray, dict]:
        """Restart ``slots``, whose episodes have just begun, from their levels edited by the level rule
        (procgen made them unedited: it starts a level inside the step that ended the last)."""
        seeds = info["level_seed"]
        edited = {}
        for slot in slots:
            state = parse_state(self.slot_state(int(slot)))
            new = self.rule.apply(state, int(seeds[slot]))
            if new is not state:
                edited[int(slot)] = serialize_state(new)
        if not edited:
            return obs, info
        return self.restart_slots(edited)

    def observe(self) -> np.ndarray:
        """The current observations (fresh after :meth:`set_slot_state`), without stepping."""
        if not self._backends:
            raise RuntimeError("call reset() before observe()")
        return self._observe()[0]

    def set_slot_state(self, slot: int, state: bytes) -> None:
        """Put env slot ``slot`` into one game state of :meth:`get_state` (of this game and options),
        e.g. the first frame of a chosen level, with its episode counters at zero. Paired evaluations
        start several slots on one level this way."""
        if not self._backends:
            self.reset()
        g = int(self.game_index[slot])
        self._backends[g].set_slot_state(slot // len(self.games), state)
        self._ep_return[slot] = 0
        self._ep_length[slot] = 0

    def restart_slots(self, states: dict[int, bytes]) -> tuple[np.ndarray, dict]:
        """Put each slot of ``states`` into its game state (as :meth:`set_slot_state`) and observe again:
        every slot's observation and ``info`` (``level_seed``, ``human``) as :meth:`step` returns them,
        those of the restarted slots now showing their new state."""
        for slot, state in states.items():
            self.set_slot_state(slot, state)
        obs, _, _, info, _ = self._observe()
        return obs, info

    def slot_state(self, slot: int) -> bytes:
        """Env slot ``slot``'s procgen game state (``get_state`` bytes) alone: a level rule reads only the
        slots whose episodes just began, and reading every slot would cost as many serializations."""
        if not self._backends:
            raise RuntimeError("call reset() before slot_state()")
        return self._backends[int(self.game_index[slot])].get_slot_state(slot // len(self.games))

    def slot_states(self) -> list[bytes]:
        """Each env slot's procgen game state (``get_state`` bytes), in slot order."""
        if not self._backends:
            raise RuntimeError("call reset() before slot_states()")
        out: list[bytes] = [b""] * self.num_envs
        for backend, sl in zip(self._backends, self._slots, strict=True):
            for slot, state in zip(range(self.num_envs)[sl], backend.get_slot_states(), strict=True):
                out[slot] = state
        return out

    def _observe(self):
        """Gather all games' buffers into fresh arrays (slot i <- game i mod G).

        Returns ``obs, reward, first, info, (prev_level_seed, prev_level_complete)``; the last
        pair describes the episode that just ended where ``first`` is set.
        """
        N = self.num_envs
        obs = np.empty((N, 64, 64, 3), np.uint8)
        reward = np.empty(N, np.float32)
        first = np.empty(N, bool)
        level_seed = np.empty(N, np.int64)
        prev_seed = np.empty(N, np.int64)
        prev_complete = np.empty(N, bool)
        human = np.empty((N, 512, 512, 3), np.uint8) if self.render_human else None
        for backend, sl in zip(self._backends, self._slots, strict=True):
            rgb, rew, fst, inf = backend.observe()
            obs[sl] = rgb
            reward[sl] = rew
            first[sl] = fst
            level_seed[sl] = inf["level_seed"]
            prev_seed[sl] = inf["prev_level_seed"]
            prev_complete[sl] = inf["prev_level_complete"]
            if human is not None:
                human[sl] = inf["rgb"]
        info = {"level_seed": level_seed}
        if human is not None:
            info["human"] = human
        return obs.transpose(0, 3, 1, 2), reward, first, info, (prev_seed, prev_complete)

    # -- state (exact resume) -----------------------------------------------------------------
    def get_state(self) -> dict:
        """Everything needed to continue exactly: procgen game states and episode accumulators."""
        state = {
            "procgen": [backend.get_state() for backend in self._backends],
            "ep_return": self._ep_return.copy(),
            "ep_length": self._ep_length.copy(),
        }
        if self.paid is not None:
            state["paid"] = self.paid.state()
        return state

    def set_state(self, state: dict) -> tuple[np.ndarray, dict]:
        """Restore :meth:`get_state` output; returns the current observation and info."""
        if not self._backends:
            self.reset()
        if len(state["procgen"]) != len(self._backends):
            raise ProclabError("environment state does not match this env's games; cannot restore it.")
        for backend, games_state in zip(self._backends, state["procgen"], strict=True):
            backend.set_state(list(games_state))
        self._ep_return[:] = state["ep_return"]
        self._ep_length[:] = state["ep_length"]
        if self.paid is not None:
            self.paid.set_state(state["paid"], self.slot_states())
        obs, _, _, info, _ = self._observe()
        return obs, info

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return (
            f"ProcgenVecEnv(games={','.join(self.games)}, mode={self.config.mode}, "
            f"num_envs={self.num_envs}, split={self.split.label()}, seed={self.seed})"
        )
