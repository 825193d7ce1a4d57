"""``proclab record``: complete episodes of an agent, with its internals, into an episode store.

Parse -> call -> write: the recordings themselves (what one is, its shards, its worker processes and Ray
tasks) are :mod:`proclab.record.recording`; this module turns the options into a recording's
:class:`~proclab.record.recording.RecordSettings`, plans what is still to record (``--resume``), runs it with a
progress bar and prints where the store is.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated

import tyro

from proclab.errors import ProclabError
from proclab.io.arguments import AGENT, DATA, LevelRuleFlag, settings_from
from proclab.io.checkpoint import Checkpoint
from proclab.record.recording import (
    AgentFacts,
    Recording,
    RecordSettings,
    open_checkpoint,
    prepare_recording,
    run_recording,
)
from proclab.run.runtime import RuntimeConfig
from proclab.store.store import EpisodeStore
from proclab.store.writer import check_root


@dataclass(frozen=True)
class RecordArgs(RuntimeConfig, LevelRuleFlag):
    """Record complete episodes of an agent (frames, actions, both policies' logits, values, raw and
    normalised rewards, agent states) into an episode store (zarr, crash-safe, resumable). The stored
    outputs are the agent's as computed at --precision: give --precision fp32 for its exact fp32 outputs
    (auto computes in bf16 where the hardware has it)."""

    agent: Annotated[Path | None, AGENT] = None
    """The agent: a proclab run or checkpoint directory (a run: its latest checkpoint). With --resume: only
    if the recording's checkpoint has moved (the same kind of agent)."""
    episodes: int = 100
    """Complete episodes to record (over all env slots and workers)."""
    out: Annotated[Path | None, DATA] = None
    """The episode store to write (created if missing; a compatible store gets new shards)."""
    resume: Annotated[Path | None, DATA] = None
    """Continue the unfinished recordings of this store up to their requested episode counts."""
    split: Annotated[str | None, tyro.conf.arg(metavar="SPLIT")] = None
    """Level split to play (named or START:NUM); default: the agent's training split."""
    levels_from: Annotated[str | None, tyro.conf.arg(metavar="FILE")] = None
    """Play the states of this level-state file instead of a split (proclab level edit writes them): each
    episode starts from one, in order (see proclab.levels.play); every worker's shard starts at the first."""
    ground_truth: bool = True
    """Also store the game's ground truth: per-step features and events, each episode's first game state and,
    for CoinRun and Maze, whether the episode reached each of the game's two goals (per-episode goal/coin and
    goal/end: the coin taken, the level's end cell touched; goal/cheese and goal/corner: the cheese, the
    maze's top-right cell; docs/ground-truth.md) (--no-ground-truth: only what the agent saw and did)."""
    num_envs: int = 64
    """Parallel environments per worker."""
    edit: tyro.conf.UseAppendAction[tuple[str, ...]] = ()
    """Record the agent with this edit applied at a hook point on every forward pass: "HOOK SELECTION KIND
    VALUE", e.g. "torso.block1.hook_out channel 7 set 0" (kinds set, add, scale); repeatable; saved with the
    recording."""
    action_noise: str = "none"
    """Noise on the acting policy's logits: none, seed (interpreting-rl-behavior's), or ops such as
    scale=0.7,clamp=-1.8:0.8,set=9-14:-3,set=7:0.1 (see proclab.record.noise)."""
    videos: int = 0
    """Also write mp4s (agent view, action arrows) of the first K episodes to DATA/videos/."""
    human: bool = False
    """Also store Procgen's 512x512 view of every step as obs_human (64x more frame data)."""
    state_dtype: str = "float32"
    """Storage type of agent states: float32 (exact replay) or float16 (half the bytes)."""
    seed: int = 0
    """Seed of levels and action sampling (each shard derives its own from it)."""
    workers: int = 1
    """Recorder processes (or Ray tasks with --ray-address), each writing its own shard; with
    --torch-threads 0 each computes on cores / workers threads (a Ray task: 1)."""
    ray_address: str | None = None
    """Record as --workers Ray tasks on this cluster (auto, ray://HOST:10001, or local) instead of local
    processes; every node must see DATA at the same path."""
    commit_seconds: float = 1.0
    """Commit finished episodes at least this often; a killed recorder loses at most this much."""


@dataclass(frozen=True)
class _Plan:
    """Episodes and videos still to record for one recording, and its checkpoint if already loaded."""

    recording: Recording
    episodes: int
    videos: int
    checkpoint: Checkpoint | None = None


def _resume(args: RecordArgs) -> list[_Plan]:
    """What is still to record for each unfinished recording of ``args.resume``."""
    defaults = asdict(RecordSettings())
    given = asdict(settings_from(args, RecordSettings))
    check_root(args.resume)
    found = EpisodeStore(args.resume).recordings()
    if not found:
        raise ProclabError(f"episode store {str(args.resume)!r} holds no recording made by proclab record")
    moved: tuple[Checkpoint, AgentFacts] | None = None
    plans = []
    for entry in found.values():
        rec = Recording.from_attrs(entry["recording"])
        changed = [k for k, v in given.items() if v != defaults[k] and v != getattr(rec.settings, k)]
        if changed:
            flags = ", ".join("--" + k.replace("_", "-") for k in changed)
            raise ProclabError(f"--resume continues a recording with its saved settings; drop {flags}")
        if args.agent is not None:  # the checkpoint moved: it must be the same kind of agent
            moved = moved or open_checkpoint(args.agent)
            facts = moved[1]
            if facts.games != rec.games or facts.num_actions != rec.num_actions:
                raise ProclabError(
                    f"checkpoint {facts.path!r} plays {', '.join(facts.games)} with {facts.num_actions} "
                    f"actions; the recording in {str(args.resume)!r} is of {', '.join(rec.games)} with "
                    f"{rec.num_actions}"
                )
            rec = replace(rec, checkpoint=facts.path)
        missing = rec.episodes - entry["committed"]
        videos = [
            v for v in (args.resume / "videos").glob("*.mp4") if v.stem.rsplit("-", 1)[0] in entry["shards"]
        ]
        if missing > 0:
            videos_left = max(0, rec.settings.videos - len(videos))
            plans.append(_Plan(rec, missing, videos_left, moved[0] if moved is not None else None))
    return plans


def run(args: RecordArgs) -> tuple[Path, list[str]]:
    """Record (or resume); returns the store and the ids of the recordings that ran."""
    if args.resume is not None:
        if args.out is not None:
            raise ProclabError("give either --out DATA (a new recording) or --resume DATA, not both")
        store = args.resume
        plans = _resume(args)
    else:
        if args.agent is None or args.out is None:
            raise ProclabError(
                "give --agent AGENT and --out DATA to record, or --resume DATA to continue a recording"
            )
        recording, ckpt = prepare_recording(args.agent, args.out, settings_from(args, RecordSettings))
        store, plans = args.out, [_Plan(recording, args.episodes, args.videos, ckpt)]
    for plan in plans:
        run_recording(
            plan.recording,
            store,
            plan.episodes,
            plan.videos,
            checkpoint=plan.checkpoint,
            runtime=settings_from(args, RuntimeConfig),
            workers=args.workers,
            ray_address=args.ray_address,
            commit_seconds=args.commit_seconds,
        )
    return store, [plan.recording.id for plan in plans]


def record_command(argv: list[str], prog: str = "proclab record") -> None:
    args = tyro.cli(RecordArgs, args=argv, prog=prog)
    store, ran = run(args)
    data = EpisodeStore(store)
    size = data.size_on_disk() - sum(f.stat().st_size for f in (store / "videos").glob("*.mp4"))
    if not ran:
        print(f"nothing to resume: every recording in {store} has its requested episodes")
    per_step = size / max(data.num_steps, 1)
    print(f"{data.num_episodes:,} episodes, {data.num_steps:,} steps, {per_step:,.0f} bytes/step on disk")
    if any((store / "videos").glob("*.mp4")):
        print(f"videos: {store / 'videos'}")
    print(f"episode store: {store}")
