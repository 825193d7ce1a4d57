r"""Paired episodes in batches: many (level, variant) episodes stepped together, one agent forward a step.

A sweep compares ``V`` variants of an agent (the plain one and, per direction and arm, a held
coordinate) on the same ``L`` levels: ``V x L`` episodes, one per (variant, level). Running them
as ``V`` evaluations one after another would run ``V`` small batches; here every env slot plays
one such episode at a time and all slots step together, so the agent's forward pass sees up to
``rows`` episodes of any variants at once (a *plan* turns each row's variant and value into
:class:`~proclab.models.interventions.Intervention`\ s over the rows that play them, which the one
agent wrapper applies; on a CPU the forward goes through the rows in cache-sized pieces,
:data:`CPU_CHUNK`, which is faster per frame than one large batch). A slot whose episode
ends is given the next episode in level-major order (all variants of a level, then the next
level), so slots never wait for a level's slowest variant, and only one level's start state is
kept at a time.

**Pairing.** A slot starts an episode by loading the saved game state of its level's first
frame (:class:`ProcgenLevels`: a one-level Procgen env is created and its state saved), so all
variants of a level start from the same game state, RNG included, and a Procgen episode is then
a function of the level and the actions alone. With ``greedy=False`` actions are sampled by the
Gumbel-max trick from noise keyed by (seed, level, step): every variant of a level draws the same
noise at the same step (common random numbers), so differences between variants come from the
edit, not from the draw.

Any env with this interface can be played (tests use a small deterministic one):
``num_envs``; ``level_state(level)`` (what ``load`` takes to start that level); ``load(slot,
state)``; ``observe()`` (``(N, 3, 64, 64)`` uint8); ``step(actions)`` returning ``obs, reward,
terminated, truncated, info`` with ``info["episode"]["level_complete"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from proclab.envs import NOOP, EnvConfig, LevelSplit, ProcgenVecEnv
from proclab.errors import ProclabError
from proclab.levels.file import LevelStates
from proclab.levels.play import check_levels_fit, with_options_of
from proclab.models.interventions import Intervention
from proclab.run.runtime import acting_threads, torch_threads

KEPT_LEVELS = 64
"""Level start states :meth:`ProcgenLevels.level_state` keeps (about 40 KB each in CoinRun)."""
CPU_CHUNK = 64
"""Rows per agent forward on a CPU: fp32 convolutions on cache-sized pieces run faster per frame than
one large batch (the seed's architecture, one thread: about 1.6x at 64 rows against 256 at once)."""


class ProcgenLevels:
    """A Procgen vector env of ``slots`` slots that start chosen levels (one game): level seeds, or with
    ``levels`` (a level-state file's content) the indices of its states (``--levels-from``)."""

    def __init__(self, config: EnvConfig, slots: int, seed: int, levels: LevelStates | None = None):
        if len(config.games()) != 1:
            raise ProclabError(
                f"paired levels are played in one game; the agent plays {', '.join(config.games())}"
            )
        self.config, self.seed, self.num_envs = replace(config, num_envs=slots), seed, slots
        self.env = ProcgenVecEnv(self.config, seed=seed)
        self.env.reset()
        self._levels: dict[int, bytes] = {}
        self._replayer: ProcgenVecEnv | None = None
        self.states = None
        if levels is not None:
            check_levels_fit(levels, config.games(), config.mode, "the level-state file")
            reference = self.env.slot_state(0)  # drawn with the agent's options, as in play
            self.states = [with_options_of(s.data, reference) for s in levels.states]

    def level_state(self, level: int) -> bytes:
        """The game state of level ``level``'s first frame (with a file: its state number ``level``); the
        last :data:`KEPT_LEVELS` levels' are kept, as a level's variants and replays ask for it again."""
        if self.states is not None:
            return self.states[level]
        if level not in self._levels:
            one = ProcgenVecEnv(replace(self.config, num_envs=1), seed=self.seed, split=LevelSplit(level, 1))
            one.reset()
            try:
                self._levels[level] = one.slot_state(0)
            finally:
                one.close()
            while len(self._levels) > KEPT_LEVELS:
                self._levels.pop(next(iter(self._levels)))
        return self._levels[level]

    def replay(self, level: int, actions: np.ndarray) -> bytes | None:
        """The game state after ``actions`` from level ``level``'s first frame, played in a one-slot env of
        the same game and options (a Procgen game state carries its random state, so an episode replays
        exactly: tested against the state observed in play); None if the replay ended on the way."""
        if self._replayer is None:
            self._replayer = ProcgenVecEnv(replace(self.config, num_envs=1), seed=self.seed)
            self._replayer.reset()
        self._replayer.set_slot_state(0, self.level_state(level))
        for a in np.asarray(actions).tolist():
            _, _, terminated, truncated, _ = self._replayer.step(np.array([a]))
            if terminated[0] or truncated[0]:
                return None  # ended before its last action: not the episode that was played
        return self._replayer.slot_state(0)

    def load(self, slot: int, state: bytes) -> None:
        self.env.set_slot_state(slot, state)

    def observe(self) -> np.ndarray:
        return self.env.observe()

    def step(self, actions):
        return self.env.step(actions)

    def close(self) -> None:
        self.env.close()
        if self._replayer is not None:
            self._replayer.close()


OUTCOMES = ("ret", "complete", "length", "actions", "timed_out")
"""The fields of :class:`Outcomes`, each ``(V, L, ...)``: variants first, then levels."""


@dataclass(frozen=True)
class Outcomes:
    """Per variant and level (``(V, L)``): return, level completed, length; action counts ``(V, L, A)``;
    ``timed_out``: the episode hit the time limit (Procgen's ``truncated``; None when not recorded)."""

    ret: np.ndarray
    complete: np.ndarray
    length: np.ndarray
    actions: np.ndarray
    timed_out: np.ndarray | None = None

    @classmethod
    def empty(cls, variants: int, levels: int, num_actions: int) -> Outcomes:
        return cls(
            np.zeros((variants, levels)),
            np.zeros((variants, levels)),
            np.zeros((variants, levels)),
            np.zeros((variants, levels, num_actions), np.int64),
            np.zeros((variants, levels), bool),
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """The outcomes by name (:data:`OUTCOMES`), as a block of levels saves them."""
        return {name: getattr(self, name) for name in OUTCOMES}

    @classmethod
    def of_arrays(cls, arrays) -> Outcomes:
        """The outcomes :meth:`arrays` gave (any mapping holding those names: a dict, an open ``.npz``)."""
        return cls(*(np.asarray(arrays[name]) for name in OUTCOMES))

    @classmethod
    def concatenate(cls, blocks: Sequence[Outcomes]) -> Outcomes:
        """Blocks of levels played apart, as one play of all their levels (along the levels, in block order)."""
        return cls(*(np.concatenate([getattr(b, name) for b in blocks], axis=1) for name in OUTCOMES))


class _Slots:
    """Which episode (``job = level * V + variant``) each env slot plays, and its running totals."""

    def __init__(self, env, levels: np.ndarray, variants: int, num_actions: int):
        self.env, self.levels, self.V = env, levels, variants
        R = env.num_envs
        self.job = np.full(R, -1, np.int64)
        self.ret = np.zeros(R)
        self.length = np.zeros(R, np.int64)
        self.counts = np.zeros((R, num_actions), np.int64)
        self.cursor, self.total = 0, variants * len(levels)
        self._snapshot: tuple[int, object] = (-1, None)

    def start(self, rows) -> None:
        """Give each slot of ``rows`` the next episode (or none when all have started)."""
        for r in rows:
            if self.cursor == self.total:
                self.job[r] = -1
                continue
            level = self.cursor // self.V
            if self._snapshot[0] != level:  # level-major: one level's start state at a time
                self._snapshot = (level, self.env.level_state(int(self.levels[level])))
            self.env.load(int(r), self._snapshot[1])
            self.job[r] = self.cursor
            self.cursor += 1
            self.ret[r], self.length[r], self.counts[r] = 0.0, 0, 0


def _choose(
    logits: torch.Tensor, greedy: bool, seed: int, levels: np.ndarray, steps: np.ndarray
) -> np.ndarray:
    """Greedy actions, or Gumbel-max samples with noise keyed by (seed, level, step) per row."""
    logits = logits.float().cpu().numpy()
    if not greedy:
        noise = [
            np.random.default_rng([seed, int(lv), int(t)]).gumbel(size=logits.shape[1])
            for lv, t in zip(levels, steps, strict=True)
        ]
        logits = logits + np.stack(noise)
    return logits.argmax(1)


Plan = Callable[[torch.Tensor, torch.Tensor], Sequence[Intervention]]
"""Rows' variant codes and values -> the interventions that play them (empty: the plain agent)."""


@torch.inference_mode()
def play(
    agent,
    plan: Plan | None,
    env,
    levels: np.ndarray,
    dims: np.ndarray,
    values: np.ndarray,
    runtime,
    *,
    greedy: bool = True,
    seed: int = 0,
    tick: Callable[[int], None] | None = None,
    watch: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], object] | None = None,
    observe: Callable[[torch.Tensor, torch.Tensor, dict], None] | None = None,
) -> Outcomes:
    """Play every variant ``v`` (``dims[v]``: its code, ``-1`` the plain agent; ``values[v, l]``: its value on
    level ``l``) of ``agent`` once on each of ``levels``: before every forward pass, the interventions of
    ``agent`` (an :class:`~proclab.models.edited.Intervened`) become ``plan(codes, values)`` of the rows
    it computes (``plan`` None: any agent, played as it is). ``tick(n)`` is
    called as ``n`` episodes finish, ``watch(rows, jobs, ended, actions)`` after every env step with the rows
    that played it, their episodes (``job = level * V + variant``), whether each one ended (its slot already
    shows the next level) and the actions they took, ``observe(codes, values, state)`` after every forward
    pass with the state it left (what the edits wrote)."""
    V, L = values.shape
    R = env.num_envs
    out = Outcomes.empty(V, L, agent.config.num_actions)
    slots = _Slots(env, np.asarray(levels), V, agent.config.num_actions)
    slots.start(range(R))
    obs = env.observe()
    dev = runtime.device
    state = agent.initial_state(R, device=dev)
    first = torch.ones(R, dtype=torch.bool, device=dev)
    prev_reward = torch.zeros(R, device=dev)
    with torch_threads(acting_threads(runtime)):  # one intra-op thread on a CPU: rollout's reason
        while (slots.job >= 0).any():
            live = np.flatnonzero(slots.job >= 0)
            variant, level = slots.job[live] % V, slots.job[live] // V
            held = (
                torch.from_numpy(dims[variant]).to(dev),
                torch.from_numpy(values[variant, level]).float().to(dev),
            )
            logits, state = _forward(
                agent, plan, observe, runtime.obs_tensor(obs), state, first, prev_reward, live, *held, runtime
            )
            act = _choose(logits, greedy, seed, slots.levels[level], slots.length[live])
            actions = np.full(R, NOOP, np.int64)
            actions[live] = act
            obs, reward, terminated, truncated, info = env.step(actions)
            if watch is not None:
                watch(live, slots.job[live], (terminated | truncated)[live], act)
            slots.ret[live] += reward[live]
            slots.length[live] += 1
            slots.counts[live, act] += 1
            ended = live[(terminated | truncated)[live]]
            complete = info["episode"]["level_complete"]
            for r in ended:
                lv, v = divmod(int(slots.job[r]), V)
                out.ret[v, lv], out.complete[v, lv], out.length[v, lv] = (
                    slots.ret[r],
                    complete[r],
                    slots.length[r],
                )
                out.actions[v, lv] = slots.counts[r]
                out.timed_out[v, lv] = truncated[r]
            raw = torch.from_numpy(np.where(terminated | truncated, 0.0, reward).astype(np.float32)).to(dev)
            prev_reward, first = raw, torch.zeros(R, dtype=torch.bool, device=dev)
            if len(ended):
                slots.start(ended)
                first[torch.from_numpy(ended).to(dev)] = True
                obs = env.observe()
                if tick is not None:
                    tick(len(ended))
    return out


def _forward(agent, plan, observe, obs, state, first, prev_reward, live: np.ndarray, dims, values, runtime):
    """The agent's logits for the ``live`` rows (each holding ``dims``/``values``) and the full next
    state (the other rows' kept). On a CPU the rows go through in pieces of :data:`CPU_CHUNK`."""
    full = len(live) == len(first)
    rows = None if full else torch.from_numpy(live).to(first.device)

    def pick(x):
        return x if full else x[rows]

    o, s, f, p = pick(obs), {k: pick(v) for k, v in state.items()}, pick(first), pick(prev_reward)
    chunk = CPU_CHUNK if runtime.device.type == "cpu" else len(live)
    logits, parts = [], []
    for lo in range(0, len(live), chunk):
        sl = slice(lo, lo + chunk)
        if plan is not None:
            agent.interventions = plan(dims[sl], values[sl])
        with runtime.autocast():
            out, new = agent.step(o[sl], {k: v[sl] for k, v in s.items()}, f[sl], p[sl])
        if observe is not None:
            observe(dims[sl], values[sl], new)
        logits.append(out.logits)
        parts.append(new)
    new = {k: torch.cat([n[k] for n in parts]) for k in parts[0]} if parts[0] else {}
    if full:
        return torch.cat(logits), new
    state = {k: v.clone() for k, v in state.items()}
    for k, v in new.items():
        state[k][rows] = v.to(state[k].dtype)
    return torch.cat(logits), state
