"""``proclab record``: complete episodes of an agent, with its internals, into an episode store.

Parse -> call -> write: the recordings themselves (what one is, its shards, its worker processes and Ray
tasks, ``--resume``) are :mod:`proclab.record.recording`; this module plans what is still to record, runs
it with a progress bar and prints where the store is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import tyro
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from proclab.errors import ProclabError
from proclab.io.checkpoint import Checkpoint
from proclab.record.recording import (
    AgentFacts,
    RecordArgs,
    Recording,
    check_runtime,
    data_args,
    open_checkpoint,
    prepare_recording,
    record_ray,
    record_shard,
    record_workers,
    worker_runtime,
)
from proclab.store.store import EpisodeStore
from proclab.store.writer import check_root


# -- command line ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Plan:
    """Episodes and videos still to record for one recording, and its checkpoint if already loaded."""

    recording: Recording
    episodes: int
    videos: int
    checkpoint: Checkpoint | None = None


def _resume(args: RecordArgs) -> list[_Plan]:
    """What is still to record for each unfinished recording of ``args.resume``."""
    defaults = RecordArgs()
    check_root(args.resume)
    found = EpisodeStore(args.resume).recordings()
    if not found:
        raise ProclabError(f"episode store {str(args.resume)!r} holds no recording made by proclab record")
    moved: tuple[Checkpoint, AgentFacts] | None = None
    plans = []
    for entry in found.values():
        rec = Recording.from_attrs(entry["recording"])
        changed = [
            k for k, v in data_args(args).items() if v != getattr(defaults, k) and v != getattr(rec.args, k)
        ]
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
            videos_left = max(0, rec.args.videos - len(videos))
            plans.append(_Plan(rec, missing, videos_left, moved[0] if moved is not None else None))
    return plans


def run(args: RecordArgs) -> tuple[Path, list[str]]:
    """Record (or resume); returns the store and the ids of the recordings that ran."""
    check_runtime(args)
    if args.resume is not None:
        if args.out is not None:
            raise ProclabError("give either --out DATA (a new recording) or --resume DATA, not both")
        store = args.resume
        plans = _resume(args)
    else:
        recording, ckpt = prepare_recording(args)
        store, plans = args.out, [_Plan(recording, args.episodes, args.videos, ckpt)]
    for plan in plans:
        _record_with_progress(plan, store, args)
    return store, [plan.recording.id for plan in plans]


def _record_with_progress(plan: _Plan, store: Path, args: RecordArgs) -> None:
    recording, missing, videos = plan.recording, plan.episodes, plan.videos
    columns = (TextColumn("[bold]record"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task("record", total=missing)
        if args.ray_address is not None:
            record_ray(recording, store, missing, args, videos, lambda n: bar.advance(task, n))
            return
        if args.workers > 1:
            record_workers(recording, store, missing, args, videos, lambda n: bar.advance(task, n))
            return
        record_shard(
            recording,
            store,
            missing,
            checkpoint=plan.checkpoint,
            runtime=worker_runtime(args, args.torch_threads),
            commit_seconds=args.commit_seconds,
            videos=videos,
            on_commit=lambda episodes, _: bar.update(task, completed=episodes),
        )


def main(argv: list[str], prog: str = "proclab record") -> None:
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
