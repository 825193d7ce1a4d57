"""``proclab.rollout``: play an agent on chosen levels and get back every step, its ground truth and activations.

The notebook counterpart of ``proclab record``: the same recorder (:class:`~proclab.record.recorder.EpisodeRecorder`)
plays the same levels with the same seeds, so for one agent, levels and seed a rollout and a recording
hold the same numbers (tested), but the episodes come back as torch tensors in memory instead of a store::

    ro = proclab.rollout(agent, levels="held-out", episodes=32, cache=["torso.block1.hook_out"], truth=True)
    ro.obs.shape                     # (T, B, 3, 64, 64): T the longest episode, B the episodes
    ro.cache["core.0.hook_h"]        # (T, B, 64) padded, ro.mask (T, B) marks the steps that were played
    ro.cache.packed("torso.block1.hook_out")  # the played steps only, with their episode and step
    ro.truth["coin_dx"]              # the game's ground truth at every step (NaN: none that step)
    ro.goals["end"]                  # (B,) CoinRun: the episode touched the level's end cell

Every per-step tensor is time-major ``(T, B, ...)`` and follows the store's timestep convention
(:mod:`proclab.store.schema`): row ``t`` holds ``obs_t``, the action taken, the policy's logits and value
for ``obs_t``, the reward that action earned and ``terminated``/``truncated`` after it. Rows past an
episode's end are zero (``mask`` false). Episodes are in the order they started: of ``N`` env slots,
episode ``i + k N`` is slot ``i``'s ``k``-th (a store keeps them in the order they ended).

**Activations.** ``cache`` holds the hooks asked for and, always, a recurrent core's state as its hook
points name it (``core.0.hook_h``: the state leaving each step, which playing computes anyway); packed
(the played steps only) with a padded view made on first use (:mod:`proclab.models.cache`: memory).

**Files.** A rollout is a :class:`~proclab.io.results.Result`: ``ro.save(folder)`` writes it (the cache packed, as
it is kept) and ``proclab.Rollout.load(folder)`` reads it back, equal; the agent that played is not saved, so a
loaded rollout's :meth:`Rollout.replay` needs ``agent=``.

**Levels.** ``levels`` is a split (``"held-out"``: levels the agent never trained on, resolved from its
training levels; ``"test1"``, ``"1000:200"``; default the agent's training levels), a level-state file,
or a list of :class:`~proclab.levels.level.Level` objects (edited counterfactuals). ``episodes`` over a
bounded split play distinct levels of it (each once; all of them in turn when there are more episodes
than levels; :func:`play_env`); a split that overlaps the agent's training levels plays with a
:class:`~proclab.errors.ProclabWarning`. With files and levels, episode ``k`` of slot ``i`` of ``N`` slots
starts from level ``(i + k N) mod n``, so ``episodes=len(levels)`` with ``num_envs=len(levels)`` plays
each once, in order.

**Goals.** With ``truth``, ``goals`` holds, per goal of the game, whether each episode reached it
(:mod:`proclab.envs.state.goals`: CoinRun's ``coin`` and ``end``, Maze's ``cheese`` and ``corner``; empty
for other games), the same values ``proclab record`` stores as ``goal/<name>``; :meth:`Rollout.table`
shows them.

**Edits.** ``interventions`` are applied on every forward pass (:class:`~proclab.models.edited.Intervened`),
and the cache records the edited values. An edit's per-row values and ``rows`` address episodes: entry
``i`` is episode ``i``'s at every one of its steps, although the batch the network sees shrinks as slots
finish and a slot plays several episodes in turn.

**Defaults.** Activations as the agent computes them (:func:`proclab.load` places it in fp32), one
intra-op thread on a CPU (``threads``), no ground truth unless ``truth=True`` (it costs 2-3x the time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from proclab.envs import EnvConfig, ProcgenVecEnv, agent_split, distinct_levels, parse_split
from proclab.envs.rules import with_rule
from proclab.errors import ProclabError
from proclab.io.files import load_npz, save_npz
from proclab.io.results import Result
from proclab.levels.file import LevelState, LevelStates, read_level_states
from proclab.levels.level import Level, as_level_states
from proclab.levels.play import GeneratedLevels, LevelsEnv
from proclab.models.cache import ActivationCache, resolve_names
from proclab.models.edited import AgentLike, Intervened, module_of, run_with_cache
from proclab.models.hooks import device_of
from proclab.models.interventions import Intervention, state_hook
from proclab.record.ground_truth import ground_truth_names
from proclab.record.noise import ActionNoise
from proclab.record.recorder import CACHE, EpisodeRecorder
from proclab.run.runtime import Runtime, acting_threads, make_runtime, torch_threads
from proclab.store.schema import GOAL, STATE_OUT, unflatten_state

CACHE_FILE = "cache.npz"
START_STATES_FILE = "start_states.npz"


@dataclass(frozen=True, repr=False)
class Rollout(Result):
    """Complete episodes of an agent as torch tensors, time-major ``(T, B, ...)`` (module docstring)."""

    game: str
    mode: str
    obs: Tensor  # (T, B, 3, 64, 64) uint8
    actions: Tensor  # (T, B) int64
    rewards: Tensor  # (T, B) float32, the env's raw reward
    terminated: Tensor  # (T, B) bool
    truncated: Tensor  # (T, B) bool
    values: Tensor  # (T, B) float32
    logits: Tensor  # (T, B, A) the agent's policy logits (before any action noise)
    mask: Tensor  # (T, B) bool: the step was played
    levels: Tensor  # (B,) int64 each episode's level seed
    returns: Tensor  # (B,) float64
    level_complete: Tensor  # (B,) bool
    level_rule: str = ""  # the rule that edited every level at its start (proclab.envs.rules), "" for none
    truth: dict[str, Tensor] = field(default_factory=dict)  # feature or event -> (T, B) float64, NaN: none
    goals: dict[str, Tensor] = field(default_factory=dict)  # goal -> (B,) bool: the episode reached it
    start_states: tuple[bytes, ...] = field(default=(), metadata={"saved": False})  # first game states
    cache: ActivationCache = field(default_factory=lambda: ActivationCache({}), metadata={"saved": False})
    # who played (not saved: a loaded rollout replays with the agent it is given)
    agent: AgentLike | None = field(default=None, repr=False, compare=False, metadata={"saved": False})

    def _write_files(self, folder: Path) -> None:
        """The cache as the rollout keeps it, packed (``cache.npz``: each hook's played steps, episode after
        episode), and the first game states (``start_states.npz``: their bytes end to end, and their sizes).
        The agent that played is not saved: a loaded rollout replays with the agent given."""
        if len(self.cache):
            rows = {name: self.cache.packed(name).values.detach().cpu().numpy() for name in self.cache}
            save_npz(folder / CACHE_FILE, "activation cache", **rows)
        if self.start_states:
            data = np.frombuffer(b"".join(self.start_states), np.uint8)
            sizes = np.array([len(s) for s in self.start_states], np.int64)
            save_npz(folder / START_STATES_FILE, "start states", data=data, sizes=sizes)

    @classmethod
    def _read_files(cls, folder: Path, fields: dict) -> dict:
        out = {}
        if (folder / CACHE_FILE).is_file():
            rows = {
                k: torch.from_numpy(v) for k, v in load_npz(folder / CACHE_FILE, "activation cache").items()
            }
            out["cache"] = ActivationCache.from_packed(rows, fields["mask"].sum(0), fields["levels"])
        if (folder / START_STATES_FILE).is_file():
            saved = load_npz(folder / START_STATES_FILE, "start states")
            parts = np.split(saved["data"], np.cumsum(saved["sizes"])[:-1])
            out["start_states"] = tuple(part.tobytes() for part in parts)
        return out

    def replay(
        self, agent: AgentLike | None = None, names: Sequence[str] | str | None = None, batch: int = 16
    ) -> ActivationCache:
        """The activations ``names`` (patterns too; None: all) of ``agent`` (default: the one that played)
        on these episodes' frames, each episode from a fresh state, as a ``(T, B, ...)`` cache with this
        rollout's mask: the same numbers as a cache taken while playing, for any agent (a control). Steps
        past an episode's end are zero, as a cache taken while playing has them, and are not run (a batch
        of ``batch`` episodes runs to its longest)."""
        agent = agent if agent is not None else self.agent
        if agent is None:
            raise ProclabError("this rollout does not know the agent that played it: pass agent=")
        names = resolve_names(names, agent.hook_points())
        device = device_of(module_of(agent))
        T, B = self.mask.shape
        prev = torch.zeros((T, B))
        prev[1:] = self.rewards[:-1]
        parts: dict[str, list[Tensor]] = {n: [] for n in names}
        with torch.inference_mode():
            for lo in range(0, B, batch):
                cols = slice(lo, min(B, lo + batch))
                t = max(1, int(self.mask[:, cols].sum(0).max()))  # past the batch's longest episode: padding
                obs = self.obs[:t, cols].to(device)
                firsts = torch.zeros(obs.shape[:2], dtype=torch.bool, device=device)
                firsts[0] = True
                _, _, cache = run_with_cache(agent, obs, None, names, firsts, prev[:t, cols].to(device))
                played = self.mask[:t, cols]
                for n in names:
                    x = cache[n].float().cpu()
                    x[~played] = 0.0  # as a cache taken while playing: nothing past an episode's end
                    parts[n].append(torch.cat([x, x.new_zeros((T - t, *x.shape[1:]))]))
        return ActivationCache(
            {n: torch.cat(v, 1) for n, v in parts.items()}, mask=self.mask, levels=self.levels
        )

    @property
    def lengths(self) -> Tensor:
        """``(B,)`` steps of each episode."""
        return self.mask.sum(0)

    @property
    def num_episodes(self) -> int:
        return self.mask.shape[1]

    def start_levels(self) -> list[Level]:
        """Each episode's first game state as a :class:`Level` to edit and play again (``truth=True`` only)."""
        if not self.start_states:
            raise ProclabError("this rollout kept no start states: roll out with truth=True")
        return [
            Level(LevelState(data, int(seed)), self.game, self.mode, f"rollout episode {b}")
            for b, (data, seed) in enumerate(zip(self.start_states, self.levels.tolist(), strict=True))
        ]

    def table(self) -> list[dict]:
        lengths = self.lengths
        return [
            {
                "episode": b,
                "level": int(self.levels[b]),
                "length": int(lengths[b]),
                "return": float(self.returns[b]),
                "completed": bool(self.level_complete[b]),
                **{name: bool(reached[b]) for name, reached in self.goals.items()},
            }
            for b in range(self.num_episodes)
        ]


def rollout(
    agent: AgentLike,
    game: str | None = None,
    levels: str | Path | Level | Sequence[Level] | LevelStates | None = None,
    *,
    episodes: int | None = None,
    steps: int | None = None,
    interventions: Sequence[Intervention] = (),
    cache: Sequence[str] | str | None = None,
    truth: bool = False,
    greedy: bool = False,
    seed: int = 0,
    num_envs: int = 64,
    noise: str = "none",
    mode: str | None = None,
    level_rule: str | None = None,
    runtime: Runtime | None = None,
    threads: int | None = None,
) -> Rollout:
    """Play ``agent`` and return its episodes (module docstring).

    ``episodes``: complete episodes (split over ``num_envs`` slots, a fixed quota each, as ``proclab record``);
    or ``steps``: complete episodes until they hold at least this many steps (each slot finishes the
    episode it is in). ``game``/``mode`` default to what the agent plays (``agent.env_config``, set by
    :func:`proclab.load`). ``cache``: hook names or glob patterns to record (``"core.*"``); ``truth``: the
    game's features and events per step (off by default: it costs 2-3x the rollout's time); ``greedy``:
    argmax actions instead of sampled ones; ``noise``: action noise as ``proclab record --action-noise``
    takes it. ``level_rule``: edit every generated level at its start (:mod:`proclab.envs.rules`, e.g.
    ``"coin-moved:percent=100"``; ``"none"``: no rule; default: the agent's own); Level objects and files
    play as they are. ``runtime`` defaults to the agent's; ``threads``: torch's intra-op threads while
    playing (None: :func:`~proclab.run.runtime.acting_threads`, one on a CPU, measured fastest there).

    ``interventions`` with per-row values (``per_row=True``) or ``rows`` address *episodes*: row ``i`` of a
    per-row value is episode ``i``'s, whichever env slot plays it and however many episodes have ended.
    """
    budget = episodes if episodes is not None else steps
    if budget is None or (episodes is not None and steps is not None):
        raise ProclabError(
            "give episodes= (complete episodes) or steps= (complete episodes of at least so many steps)"
        )
    if budget < 1:
        raise ProclabError(f"{'episodes' if episodes is not None else 'steps'} must be >= 1, got {budget}")
    rt = runtime or getattr(agent, "runtime", None) or make_runtime("cpu", "fp32")
    config, level_states = _setting(agent, game, mode, levels, level_rule)
    _check_per_episode(interventions, episodes)
    names = resolve_names(cache, agent.hook_points()) if cache is not None else []
    state_hooks = {
        state_hook(key) for key in agent.state_shapes()
    }  # recorded anyway, as the state leaving a step
    names = [n for n in names if n not in state_hooks]
    edited = Intervened(agent, interventions) if interventions else None
    played = agent if edited is None else edited
    env = play_env(
        config,
        seed,
        num_envs if episodes is None else min(num_envs, episodes),
        level_states,
        episodes=episodes,
    )
    recorder = EpisodeRecorder(
        env,
        played,
        rt,
        noise=ActionNoise.parse(noise),
        greedy=greedy,
        ground_truth=truth,
        cache=names,
        with_slot=True,
        playing=None if edited is None else edited.playing,
    )
    kept: list[tuple[dict, dict]] = []
    total = [0]

    def sink(rows: dict, episode: dict) -> None:
        kept.append((rows, episode))
        total[0] += len(rows["obs"])

    try:
        target = episodes if episodes is not None else env.num_envs * 2**20
        with torch_threads(acting_threads(rt, threads)):
            recorder.run(target, sink, stop=None if steps is None else (lambda: total[0] >= steps))
    finally:
        env.close()
    return _assemble(_in_start_order(kept, env.num_envs), recorder, config, names, truth, agent)


def _check_per_episode(interventions: Sequence[Intervention], episodes: int | None) -> None:
    """Per-episode values and rows must name the rollout's episodes (one line otherwise, before playing)."""
    for iv in interventions:
        if not (iv.per_row or iv.rows is not None):
            continue  # the same for every episode
        if episodes is None:
            raise ProclabError(
                f"the edit at {iv.hook} is given per episode: roll out a number of episodes (episodes=), "
                "not of steps"
            )
        sizes = {
            "value": iv.value
            if iv.per_row and isinstance(iv.value, torch.Tensor) and iv.value.dim()
            else None,
            "rows mask": iv.rows
            if isinstance(iv.rows, torch.Tensor) and iv.rows.dtype == torch.bool
            else None,
        }
        for what, x in sizes.items():
            if x is not None and len(x) != episodes:
                raise ProclabError(
                    f"the {what} of the edit at {iv.hook} has {len(x)} rows; the rollout plays {episodes} "
                    "episodes: give one per episode"
                )
        if iv.rows is not None and sizes["rows mask"] is None:
            rows = torch.as_tensor(iv.rows).reshape(-1)
            if len(rows) and not (int(rows.min()) >= 0 and int(rows.max()) < episodes):
                raise ProclabError(
                    f"rows {rows.tolist()} of the edit at {iv.hook}: the rollout plays episodes 0-{episodes - 1}"
                )


def _in_start_order(kept: list[tuple[dict, dict]], slots: int) -> list[tuple[dict, dict]]:
    """Episodes as they started: slot ``i``'s ``k``-th is number ``i + k * slots``."""
    seen: dict[int, int] = {}
    jobs = []
    for _, episode in kept:
        slot = episode["slot"]
        jobs.append(slot + seen.get(slot, 0) * slots)
        seen[slot] = seen.get(slot, 0) + 1
    return [kept[j] for j in np.argsort(jobs, kind="stable")]


def play_env(
    config: EnvConfig,
    seed: int,
    num_envs: int,
    levels: LevelStates | GeneratedLevels | None = None,
    *,
    episodes: int | None = None,
    shard: int = 0,
    render_human: bool = False,
    source: str = "the levels given",
) -> ProcgenVecEnv | LevelsEnv:
    """The envs of shard ``shard`` of a recording with ``seed`` (a rollout is shard 0): levels and action
    sampling seeded from ``(seed, shard)`` (torch's sampler too), so a rollout plays what ``proclab record``
    records in its first shard. With ``levels``, every episode starts from one of their states. Otherwise
    ``episodes`` over a bounded split of one game play distinct levels of it, drawn with the shard's seed (all
    of them, in turn, when there are more episodes than levels), each as procgen starts it with ``config``'s
    options and level rule: procgen's own draw is with replacement (8 episodes on 8 levels played 3003 twice
    and 3001 never). Without ``episodes`` (a step budget) or on an unbounded split, procgen draws."""
    env_seed, torch_seed = np.random.SeedSequence([seed, shard]).generate_state(2)
    torch.manual_seed(int(torch_seed))
    n = max(len(config.games()), num_envs)
    env = ProcgenVecEnv(
        replace(config, num_envs=n), seed=int(env_seed % 2**31), split=config.split, render_human=render_human
    )
    split = parse_split(config.split)
    if levels is None and episodes is not None and split.bounded and len(config.games()) == 1:
        chosen = split.start + np.arange(split.num) if episodes >= split.num else None
        levels = GeneratedLevels(
            config, distinct_levels(split, episodes, int(env_seed)) if chosen is None else chosen
        )
        source = f"levels of {split.label()}"
    return env if levels is None else LevelsEnv(env, levels, source)


def _setting(agent, game, mode, levels, level_rule=None) -> tuple[EnvConfig, LevelStates | None]:
    """The env the agent plays (its own, with ``game``/``mode``/the split of ``levels``/``level_rule`` put in)
    and the level states to start from, if any."""
    base = getattr(agent, "env_config", None)
    if base is None:
        if game is None:
            raise ProclabError("this agent does not say which game it plays: pass game= (and mode=)")
        base = EnvConfig(game=(game,), mode=mode or "easy")
    trained = parse_split(base.split) if getattr(agent, "env_config", None) is not None else None
    if game is not None and (game,) != tuple(base.games()):
        base = replace(base, game=(game,), level_rule="")  # the agent's rule is its own game's
    if mode is not None:
        base = replace(base, mode=mode)
    if len(base.games()) != 1:
        raise ProclabError(f"the agent plays {', '.join(base.games())}: pass game= to roll out one of them")
    level_states = None
    if isinstance(levels, Level):
        levels = [levels]
    if isinstance(levels, LevelStates):
        level_states = levels
    elif isinstance(levels, (list, tuple)):
        level_states = as_level_states(list(levels))
    elif isinstance(levels, Path) or (isinstance(levels, str) and Path(levels).is_file()):
        level_states = read_level_states(levels)
    elif isinstance(levels, str):
        base = replace(base, split=str(agent_split(levels, trained)))
    elif levels is not None:
        raise ProclabError(
            f"levels: a split, a level-state file or Level objects, not {type(levels).__name__}"
        )
    if level_states is not None:
        base = replace(base, game=(level_states.game,), mode=level_states.mode, level_rule="")
    return with_rule(base, level_rule), level_states


def _assemble(
    kept, recorder: EpisodeRecorder, config: EnvConfig, names: list[str], truth: bool, agent
) -> Rollout:
    """The finished episodes (in start order) as a :class:`Rollout`: per-step fields padded ``(T, B, ...)``,
    the cache packed (its padded view is made when asked for: :mod:`proclab.models.cache`)."""
    if not kept:
        raise ProclabError("the rollout played no complete episode")
    game = config.games()[0]
    B = len(kept)
    lengths = np.array([len(rows["obs"]) for rows, _ in kept], np.int64)
    T = int(lengths.max())
    mask = np.arange(T)[:, None] < lengths[None, :]

    def padded(key: str) -> Tensor:
        first = kept[0][0][key]
        out = np.zeros((T, B, *first.shape[1:]), first.dtype)
        for b, (rows, _) in enumerate(kept):
            out[: lengths[b], b] = rows[key]
        return torch.from_numpy(out)

    def packed(key: str) -> Tensor:
        return torch.from_numpy(np.concatenate([rows[key] for rows, _ in kept]))

    def per_episode(key: str, dtype) -> Tensor:
        return torch.from_numpy(np.array([ep[key] for _, ep in kept], dtype))

    rows = {n: packed(CACHE + n) for n in names}
    layout = recorder.layout
    if layout:  # the state leaving each step, recorded anyway: in the cache under its hook names
        states = unflatten_state({layer: packed(STATE_OUT + layer).numpy() for layer in layout}, layout)
        rows |= {state_hook(key): torch.from_numpy(np.ascontiguousarray(v)) for key, v in states.items()}
    order = list(recorder.agent.hook_points())
    levels = per_episode("level_seed", np.int64)
    cache = ActivationCache.from_packed(
        {n: rows[n] for n in order if n in rows}, torch.from_numpy(lengths), levels
    )
    features, goals = {}, {}
    start_states: tuple[bytes, ...] = ()
    if truth:
        columns = ground_truth_names([game])
        values, events = padded("features"), padded("events")
        features = {n: values[..., i] for i, n in enumerate(columns["features"])}
        features |= {n: events[..., i] for i, n in enumerate(columns["events"])}
        start_states = tuple(ep["initial_state"] for _, ep in kept)
        goals = {n: per_episode(GOAL + n, bool) for n in columns["goals"].get(game, [])}
    return Rollout(
        game=game,
        mode=config.mode,
        level_rule=config.level_rule,
        obs=padded("obs"),
        actions=padded("action"),
        rewards=padded("reward"),
        terminated=padded("terminated"),
        truncated=padded("truncated"),
        values=padded("value"),
        logits=padded("logits_clean"),
        mask=torch.from_numpy(mask),
        levels=levels,
        returns=per_episode("return", np.float64),
        level_complete=per_episode("level_complete", bool),
        truth=features,
        goals=goals,
        start_states=start_states,
        cache=cache,
        agent=agent,
    )


__all__ = ["Rollout", "play_env", "rollout"]
