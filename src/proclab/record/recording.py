"""Recordings: complete episodes of an agent, with its internals, into an episode store (``proclab record``).

One *recording* is one invocation: a target number of episodes and the settings that define
the data (agent checkpoint, split, envs, action noise, seed, ...), saved in the attributes of every
shard it writes. It runs in this process, or in ``--workers N`` processes that each write
their own shard. ``--resume DATA`` finds the recordings of a store that have fewer committed
episodes than requested and records the rest into new shards, with new seeds (shard ``k``
seeds its levels and actions from ``(seed, k)``), so a killed recording never repeats levels
it already has. Several recordings (e.g. from several machines) may write into one store
when they are compatible: same games, action count, agent state layout and fields.

**Ray.** With ``--ray-address`` the ``--workers`` shards are Ray tasks instead of processes: a
task records a shard exactly as a worker process does (``pip install 'proclab[distributed]'``,
a file system every node mounts at the same path). Progress then advances as tasks finish.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import queue
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

from proclab.envs import NUM_ACTIONS, EnvConfig, ProcgenVecEnv, agent_split, check_split_name, parse_split
from proclab.envs.episodes import quotas
from proclab.envs.rules import check_rule, with_rule
from proclab.errors import ProclabError, unknown_choice
from proclab.io.checkpoint import Checkpoint, load_checkpoint, load_train_state
from proclab.io.configs import from_dict
from proclab.io.progress import progress_bar
from proclab.io.video import write_video
from proclab.levels.file import read_level_states
from proclab.levels.play import LevelsEnv, check_levels_fit
from proclab.models import AgentConfig, build_agent
from proclab.models.bundled import source_path
from proclab.models.edited import Intervened
from proclab.models.interventions import parse_edits
from proclab.models.loading import load_agent
from proclab.record.ground_truth import goal_fields, ground_truth_names
from proclab.record.noise import ActionNoise
from proclab.record.recorder import EpisodeRecorder
from proclab.record.rollout import play_env
from proclab.run.runtime import Runtime, RuntimeConfig
from proclab.run.tasks import TaskSettings, run_tasks
from proclab.store.schema import (
    GOAL,
    GROUND_TRUTH_ATTR,
    STATE_LAYOUT_ATTR,
    STATE_OUT,
    STEP_FIELDS,
    state_layout,
)
from proclab.store.store import EpisodeStore
from proclab.store.writer import ShardWriter, ensure_store

if TYPE_CHECKING:
    from proclab.models.agent import Agent

FINAL_OBS_NOTE = (
    "not recorded: Procgen resets inside the step that ends an episode, so the frame after the last action "
    "is never rendered (see proclab.store.schema)"
)
STATE_DTYPES = ("float32", "float16")


@dataclass(frozen=True)
class RecordSettings:
    """What defines a recording's data (``proclab record``'s options of that name; the others say where it goes
    and how fast): saved with every shard the recording writes, so that ``--resume`` records the same."""

    level_rule: str | None = None  # edit every level at its start by this rule (None: the agent's own)
    episodes: int = 100  # complete episodes to record (over all env slots and workers)
    split: str | None = None  # level split to play (named or START:NUM); None: the agent's training split
    levels_from: str | None = None  # a level-state file whose states are played in order instead of a split
    ground_truth: bool = True  # also the game's ground truth (features, events, first game states, goals)
    num_envs: int = 64  # parallel environments per worker
    edit: tuple[str, ...] = ()  # edits at hook points, "HOOK SELECTION KIND VALUE", on every forward pass
    action_noise: str = "none"  # noise on the acting policy's logits (proclab.record.noise)
    videos: int = 0  # also write mp4s of the first K episodes to the store's videos/
    human: bool = False  # also store Procgen's 512x512 view of every step as obs_human
    state_dtype: str = "float32"  # storage type of agent states: float32 (exact replay) or float16
    seed: int = 0  # seed of levels and action sampling (each shard derives its own from it)


# -- recordings -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RewardNorm:
    """How the checkpoint's training transformed rewards: ``reward_norm = clip(reward / scale, -clip, clip)``."""

    scale: float
    clip: float | None
    source: str


@dataclass(frozen=True)
class AgentFacts:
    """What a checkpoint's agent plays and remembers, read from one opening of the checkpoint."""

    path: str
    step: int
    games: tuple[str, ...]
    mode: str
    train_split: str
    num_actions: int
    state_layout: dict[str, list]  # as stored: layer -> [[name, shape], ...]
    state_shapes: dict[str, tuple[int, ...]]
    reward_norm: RewardNorm

    @classmethod
    def of(cls, ckpt: Checkpoint) -> AgentFacts:
        agent_config = from_dict(AgentConfig, ckpt.meta["agent"])
        env_config = from_dict(EnvConfig, ckpt.meta["env"])
        shapes = build_agent(agent_config).state_shapes()
        return cls(
            path=str(ckpt.path),
            step=ckpt.step,
            games=tuple(env_config.games()),
            mode=env_config.mode,
            train_split=env_config.split,
            num_actions=agent_config.num_actions,
            state_layout=_stored_layout(shapes),
            state_shapes={k: tuple(v) for k, v in shapes.items()},
            reward_norm=reward_normalisation(ckpt),
        )


@dataclass(frozen=True)
class Recording:
    """One ``proclab record`` invocation: what it records and with which agent.

    Saved (as :meth:`attrs`) in the ``recording`` attribute of every shard it writes, which is
    how ``--resume`` finds it again (:meth:`from_attrs`).
    """

    id: str
    episodes: int
    settings: RecordSettings
    """The data-defining settings, stored under the name ``args``, which recordings have always used."""
    checkpoint: str
    checkpoint_step: int
    games: tuple[str, ...]
    mode: str
    split: str
    num_actions: int
    action_noise: str
    reward_norm: RewardNorm
    created: float
    state_layout: dict[str, list]

    def attrs(self) -> dict:
        """The JSON form stored with every shard."""
        fields = {STORED.get(f.name, f.name): getattr(self, f.name) for f in dataclasses.fields(self)}
        return {
            **fields,
            "args": dataclasses.asdict(self.settings),
            "games": list(self.games),
            "reward_norm": dataclasses.asdict(self.reward_norm),
            STATE_LAYOUT_ATTR: self.state_layout,
        }

    @classmethod
    def from_attrs(cls, attrs: dict) -> Recording:
        return cls(
            **{
                **{k: v for k, v in attrs.items() if k != "args"},
                # recordings made before ground truth existed have none: their resumed shards neither
                "settings": RecordSettings(**{"ground_truth": False, **attrs["args"]}),
                "games": tuple(attrs["games"]),
                "reward_norm": RewardNorm(**attrs["reward_norm"]),
            }
        )


STORED = {"settings": "args"}
"""Fields of :class:`Recording` stored under another name."""


def _stored_layout(shapes: dict) -> dict[str, list]:
    return {k: [[n, list(s)] for n, s in v] for k, v in state_layout(shapes).items()}


def reward_normalisation(ckpt: Checkpoint) -> RewardNorm:
    """How the checkpoint's training transformed rewards (see :class:`RewardNorm`).

    PPO checkpoints carry it in their metadata; older ones have it only in the trainer's state.
    """
    meta = ckpt.meta
    if "reward_normalisation" in meta:
        return RewardNorm(**meta["reward_normalisation"])
    train = meta.get("train", {})
    if meta.get("algo", train.get("algo")) == "impala":
        clipping = train.get("impala", {}).get("reward_clipping", "none")
        return RewardNorm(1.0, 1.0 if clipping == "abs_one" else None, f"impala {clipping}")
    ppo = train.get("ppo", {})
    if not ppo.get("normalize_reward"):
        return RewardNorm(1.0, None, "training did not normalise rewards")
    try:
        state = load_train_state(ckpt.path)
        var = float(state["ranks"][0]["actor"]["env"]["reward_rms"]["var"])
    except (ProclabError, KeyError, TypeError, IndexError):
        return RewardNorm(1.0, None, "no reward statistics in the checkpoint: reward_norm = reward")
    return RewardNorm(
        float(np.sqrt(var + 1e-8)),
        ppo.get("reward_clip"),
        f"running return std of rank 0 at step {meta.get('step')}",
    )


def open_checkpoint(path: str | Path) -> tuple[Checkpoint, AgentFacts]:
    """The agent checkpoint (or a run directory's latest), loaded once, and what it plays."""
    ckpt = load_checkpoint(path, kind="agent")
    return ckpt, AgentFacts.of(ckpt)


def _validate(settings: RecordSettings) -> None:
    for name in ("episodes", "num_envs"):
        if getattr(settings, name) < 1:
            raise ProclabError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(settings, name)}")
    if settings.videos < 0:
        raise ProclabError(f"--videos must be >= 0, got {settings.videos}")
    if settings.state_dtype not in STATE_DTYPES:
        raise unknown_choice("state dtype", settings.state_dtype, STATE_DTYPES)
    ActionNoise.parse(settings.action_noise)
    parse_edits(settings.edit)
    if settings.split is not None:
        check_split_name(settings.split)
    if settings.levels_from is not None and settings.split is not None:
        raise ProclabError("--levels-from plays a file's levels; it excludes --split")


def expected_fields(facts: AgentFacts, settings: RecordSettings) -> dict[str, dict]:
    """Per-step fields (dtype, shape) a recording with these settings writes."""
    A = facts.num_actions
    fields = {
        "obs": ("uint8", [3, 64, 64]),
        "action": ("int64", []),
        "logits": ("float32", [A]),
        "logits_clean": ("float32", [A]),
        "value": ("float32", []),
        "reward": ("float32", []),
        "reward_norm": ("float32", []),
        "terminated": ("bool", []),
        "truncated": ("bool", []),
        "step": ("int32", []),
        "level_seed": ("int64", []),
    }
    assert set(fields) == set(STEP_FIELDS)
    if settings.human:
        fields["obs_human"] = ("uint8", [3, 512, 512])
    for layer, parts in facts.state_layout.items():
        fields[STATE_OUT + layer] = (settings.state_dtype, [sum(int(np.prod(s)) for _, s in parts)])
    if settings.ground_truth:
        names = ground_truth_names(facts.games)
        fields["features"] = ("float32", [len(names["features"])])
        fields["events"] = ("bool", [len(names["events"])])
    return {k: {"dtype": dt, "shape": s} for k, (dt, s) in fields.items()}


def _check_compatible(store: Path, facts: AgentFacts, settings: RecordSettings) -> None:
    """A recording may join an existing store only if readers can treat all its episodes alike."""
    existing = EpisodeStore(store)
    if not existing.shards:
        return
    existing.check_agent(facts.num_actions, facts.state_shapes, list(facts.games))
    ours = expected_fields(facts, settings)
    if existing.step_fields != ours:
        diff = sorted(set(existing.step_fields) ^ set(ours)) or sorted(
            k for k in ours if existing.step_fields[k] != ours[k]
        )
        raise ProclabError(
            f"episode store {str(store)!r} holds other per-step fields than this recording would write "
            f"(differing: {', '.join(diff)}); record into a new --out"
            + (
                " (or pass --no-ground-truth)"
                if {"features", "events"} & set(diff) and settings.ground_truth
                else ""
            )
        )
    goals = {k for k in existing.episode_fields if k.startswith(GOAL)}
    our_goals = set(goal_fields(facts.games)) if settings.ground_truth else set()
    if goals != our_goals:
        raise ProclabError(
            f"episode store {str(store)!r} holds other per-episode goals ({', '.join(sorted(goals)) or 'none'}) "
            f"than this recording would write ({', '.join(sorted(our_goals)) or 'none'}); record into a new --out"
        )


def prepare_recording(agent: Path, out: Path, settings: RecordSettings) -> tuple[Recording, Checkpoint]:
    """Check the settings, create the store ``out`` if needed, and describe the recording of ``agent`` (a run or
    checkpoint directory); also the checkpoint, loaded once."""
    _validate(settings)
    ckpt, facts = open_checkpoint(agent)
    if facts.num_actions != NUM_ACTIONS:
        raise ProclabError(
            f"checkpoint {facts.path!r} has an agent with {facts.num_actions} actions; Procgen has {NUM_ACTIONS}"
        )
    # the agent's training levels by default; "held-out": the levels after them (a split that overlaps them warns)
    split = (
        facts.train_split if settings.split is None else str(agent_split(settings.split, facts.train_split))
    )
    # the rule resolved and spelled out (the agent's own by default), so the recording names what it played
    rule = with_rule(from_dict(EnvConfig, ckpt.meta["env"]), settings.level_rule).level_rule
    check_rule(rule, facts.games)
    settings = replace(settings, split=split, level_rule=rule)
    label = str(parse_split(split))
    if settings.levels_from is not None:
        where = f"level-state file {settings.levels_from!r}"
        check_levels_fit(read_level_states(settings.levels_from), facts.games, facts.mode, where)
        label = f"levels:{settings.levels_from}"
    if out.exists() and (out / "zarr.json").is_file():
        _check_compatible(out, facts, settings)
    ensure_store(out)
    recording = Recording(
        id=uuid.uuid4().hex[:12],
        episodes=settings.episodes,
        settings=settings,
        checkpoint=facts.path,
        checkpoint_step=facts.step,
        games=facts.games,
        mode=facts.mode,
        split=label,
        num_actions=facts.num_actions,
        action_noise=ActionNoise.parse(settings.action_noise).spec(),
        reward_norm=facts.reward_norm,
        created=time.time(),
        state_layout=facts.state_layout,
    )
    return recording, ckpt


def new_recording(agent: Path, out: Path, settings: RecordSettings) -> Recording:
    """:func:`prepare_recording` without the loaded checkpoint."""
    return prepare_recording(agent, out, settings)[0]


# -- recording one shard --------------------------------------------------------------------------
def _shard_number(name: str) -> int:
    digits = name.rsplit("-", 1)[-1]
    return int(digits) if digits.isdigit() else zlib.crc32(name.encode())


def record_shard(
    recording: Recording,
    store: str | Path,
    episodes: int,
    *,
    runtime: RuntimeConfig,
    checkpoint: Checkpoint | None = None,
    commit_seconds: float = 1.0,
    videos: int = 0,
    on_commit: Callable[[int, int], None] | None = None,
    tick: Callable[[], None] | None = None,
) -> str:
    """Record ``episodes`` episodes of ``recording`` into a new shard of ``store``; returns the shard name.

    The unit of work of ``--workers`` processes and of Ray tasks: everything it needs is in its
    arguments (plain data: ``runtime`` says where and how the agent computes), and it writes nothing outside its own shard and ``videos/``. A caller
    that has already loaded the recording's ``checkpoint`` passes it, so that it is read once.
    """
    rt = runtime.runtime()
    agent, env_config, layout = _load_recording_agent(recording, checkpoint, rt)
    attrs = {"recording": recording.attrs(), STATE_LAYOUT_ATTR: layout, "final_obs": FINAL_OBS_NOTE}
    if recording.settings.ground_truth:
        attrs[GROUND_TRUTH_ATTR] = ground_truth_names(recording.games)
    writer = ShardWriter(
        store, attrs=attrs, commit_seconds=commit_seconds, background=True, on_commit=on_commit
    )
    env = _shard_env(recording, env_config, episodes, writer.name)
    settings, norm = recording.settings, recording.reward_norm
    recorder = EpisodeRecorder(
        env,
        agent,
        rt,
        noise=ActionNoise.parse(settings.action_noise),
        reward_scale=norm.scale,
        reward_clip=norm.clip,
        state_dtype=settings.state_dtype,
        human=settings.human,
        split=recording.split,
        ground_truth=settings.ground_truth,
    )

    def on_tick() -> None:
        writer.maybe_commit()
        if tick is not None:
            tick()

    try:
        recorder.run(episodes, _writing_sink(writer, Path(store) / "videos", videos), tick=on_tick)
    finally:
        env.close()
        writer.close()
    return writer.name


def _load_recording_agent(
    recording: Recording, checkpoint: Checkpoint | None, rt: Runtime
) -> tuple[Agent, EnvConfig, dict[str, list]]:
    """The recording's agent, its env config and its stored state layout, which must be the recording's:
    a moved or retrained checkpoint whose agent remembers differently would mix two layouts in a store."""
    agent, env_config, _ = load_agent(checkpoint or recording.checkpoint, rt)
    if recording.settings.edit:
        agent = Intervened(agent, parse_edits(recording.settings.edit))
    layout = _stored_layout(agent.state_shapes())
    if layout != recording.state_layout:
        raise ProclabError(
            f"checkpoint {recording.checkpoint!r} has agent state layout {layout}; the recording was made "
            f"with {recording.state_layout}"
        )
    return agent, env_config, layout


def _shard_env(
    recording: Recording, env_config: EnvConfig, episodes: int, shard: str
) -> ProcgenVecEnv | LevelsEnv:
    """The shard's envs (:func:`~proclab.record.rollout.play_env`); levels and action sampling are seeded from
    ``(seed, shard number)``, so the new shards of a resumed recording never replay the levels of its earlier
    ones (beyond what procgen's own draws repeat)."""
    settings = recording.settings
    config = replace(env_config, level_rule=settings.level_rule or "")
    if settings.levels_from is None:
        return play_env(
            replace(config, split=str(settings.split)), settings.seed, min(settings.num_envs, episodes),
            episodes=episodes, shard=_shard_number(shard), render_human=settings.human,
        )  # fmt: skip
    levels = read_level_states(settings.levels_from)
    return play_env(
        config, settings.seed, min(settings.num_envs, episodes), levels, shard=_shard_number(shard),
        render_human=settings.human, source=f"level-state file {settings.levels_from!r}",
    )  # fmt: skip


def _writing_sink(writer: ShardWriter, video_dir: Path, videos: int) -> Callable[[dict, dict], None]:
    """Appends each finished episode to the shard, and writes a video of the shard's first ``videos``."""

    def sink(steps: dict, episode: dict) -> None:
        k = writer.append(steps, episode)
        if k < videos:
            write_video(
                video_dir / f"{writer.name}-{k:05d}.mp4",
                steps["obs"],
                fps=15,
                scale=4,
                actions=steps["action"],
            )

    return sink


# -- several processes ---------------------------------------------------------------------------
def _worker(
    recording: Recording, store: str, episodes: int, options: dict, index: int, messages, parent: int
) -> None:
    def tick() -> None:
        if os.getppid() != parent:  # the parent died (e.g. kill -9): stop, keeping what is committed
            raise SystemExit(1)

    try:
        record_shard(
            recording,
            store,
            episodes,
            tick=tick,
            on_commit=lambda e, s: messages.put(("commit", index, e)),
            **options,
        )
    except ProclabError as err:
        messages.put(("error", index, str(err)))
        raise SystemExit(2) from None


def record_workers(
    recording: Recording,
    store: Path,
    episodes: int,
    videos: int,
    advance,
    *,
    runtime: RuntimeConfig,
    workers: int,
    commit_seconds: float = 1.0,
) -> None:
    """``workers`` local processes, one shard each; with ``runtime``'s torch threads 0, each computes on
    cores / ``workers`` threads."""
    ctx = mp.get_context("spawn")
    messages = ctx.Queue()
    threads = runtime.torch_threads or max(1, (os.cpu_count() or 1) // workers)
    runtime = replace(runtime, torch_threads=threads)
    procs, done = [], {}
    for w, n in enumerate(quotas(episodes, workers)):
        if n == 0:
            continue
        options = dict(runtime=runtime, commit_seconds=commit_seconds, videos=videos if w == 0 else 0)
        p = ctx.Process(
            target=_worker, args=(recording, str(store), int(n), options, w, messages, os.getpid())
        )
        p.start()
        procs.append(p)
    try:
        while any(p.is_alive() for p in procs) or not messages.empty():
            try:
                kind, w, payload = messages.get(timeout=0.5)
            except queue.Empty:
                continue
            if kind == "error":
                raise ProclabError(payload)
            advance(payload - done.get(w, 0))
            done[w] = payload
        failed = [p.exitcode for p in procs if p.exitcode != 0]
        if failed:
            raise RuntimeError(f"{len(failed)} recorder process(es) failed (exit codes {failed}); see above")
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join()


def record_ray(
    recording: Recording,
    store: Path,
    episodes: int,
    videos: int,
    advance,
    *,
    runtime: RuntimeConfig,
    workers: int,
    address: str,
    commit_seconds: float = 1.0,
) -> None:
    """``workers`` Ray tasks on the cluster at ``address``, one shard each (the unit of work is
    :func:`record_shard`, as for processes, run by :func:`~proclab.run.tasks.run_tasks`); each task computes on
    ``runtime``'s torch threads (0: one)."""
    threads = runtime.torch_threads or 1
    options = dict(runtime=replace(runtime, torch_threads=threads), commit_seconds=commit_seconds)
    units = [
        (recording, str(store.resolve()), int(n), videos if w == 0 else 0, options)
        for w, n in enumerate(quotas(episodes, workers))
        if n > 0
    ]
    where = TaskSettings(workers=workers, ray_address=address, cpus=threads)
    for i, get in run_tasks(_shard_task, units, where):
        get()
        advance(units[i][2])


def _shard_task(unit: tuple) -> str:
    """One shard of :func:`record_ray`: ``(recording, store, episodes, videos, options)``."""
    recording, store, episodes, videos, options = unit
    return record_shard(recording, store, episodes, videos=videos, **options)


# -- a whole recording ----------------------------------------------------------------------------
def run_recording(
    recording: Recording,
    store: Path,
    episodes: int,
    videos: int,
    *,
    checkpoint: Checkpoint | None = None,
    runtime: RuntimeConfig,
    workers: int = 1,
    ray_address: str | None = None,
    commit_seconds: float = 1.0,
    progress: bool = True,
) -> None:
    """Record ``episodes`` more episodes of ``recording`` into ``store``: in this process (one shard), in
    ``workers`` local processes, or as ``workers`` Ray tasks on the cluster at ``ray_address``, with a progress
    bar over the episodes committed (``progress=False``: none)."""
    if workers < 1:
        raise ProclabError(f"workers must be >= 1, got {workers}")
    if commit_seconds < 0:
        raise ProclabError(f"commit_seconds must be >= 0, got {commit_seconds}")
    columns = (TextColumn("[bold]record"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with progress_bar(*columns, transient=True, disable=not progress) as bar:
        task = bar.add_task("record", total=episodes)

        def advance(n: int) -> None:
            bar.advance(task, n)

        options = dict(runtime=runtime, workers=workers, commit_seconds=commit_seconds)
        if ray_address is not None:
            record_ray(recording, store, episodes, videos, advance, address=ray_address, **options)
        elif workers > 1:
            record_workers(recording, store, episodes, videos, advance, **options)
        else:
            record_shard(
                recording,
                store,
                episodes,
                checkpoint=checkpoint,
                runtime=runtime,
                commit_seconds=commit_seconds,
                videos=videos,
                on_commit=lambda committed, _: bar.update(task, completed=committed),
            )


def record_episodes(
    agent: str | Path,
    out: str | Path,
    settings: RecordSettings | None = None,
    *,
    runtime: RuntimeConfig | None = None,
    workers: int = 1,
    ray_address: str | None = None,
    commit_seconds: float = 1.0,
    progress: bool = True,
) -> EpisodeStore:
    """Record ``settings.episodes`` complete episodes of ``agent`` into the episode store ``out``; returns it.

    ``agent`` is a proclab run or checkpoint directory, or a shipped agent's name (``"coinrun/small"``);
    ``settings`` says what the data is (split, edits, noise, seed, ...: ``proclab record``'s options of those
    names), ``runtime`` where and how the agent computes (default: fp32, on a GPU if there is one). A new store is created; an existing
    one gets new shards when it is compatible (same games, actions, state layout and fields), so nothing in it
    is overwritten. The function behind ``proclab record --agent AGENT --out DATA``, for a notebook or script::

        store = proclab.record_episodes("coinrun/small", "episodes", RecordSettings(episodes=50, split="held-out"))
    """
    settings = settings or RecordSettings()
    runtime = runtime or RuntimeConfig(precision="fp32")
    path = source_path(agent)
    out = Path(out)
    recording, ckpt = prepare_recording(path, out, settings)
    run_recording(
        recording,
        out,
        settings.episodes,
        settings.videos,
        checkpoint=ckpt,
        runtime=runtime,
        workers=workers,
        ray_address=ray_address,
        commit_seconds=commit_seconds,
        progress=progress,
    )
    return EpisodeStore(out)
