"""Simulated rollouts of the agent in the learned world, into an episode store (``proclab wm sample``).

Each sample starts from a bottleneck vector, **informed** (the encoding of ``num_init_steps``
real frames of a store, by default the one the model was trained on) or **random** (uniform on
the unit sphere), and runs the simulator in closed loop for ``--steps`` steps: the converters
give the initial environment state, agent state and previous action; every predicted frame
goes through the agent, whose action drives the next step. By default everything is modal
(argmax of each categorical, the agent's most likely action), as the seed's recordings were;
``--no-modal`` samples the prior and ``--no-greedy`` the agent's policy. Given ``--seed``,
sampling is deterministic.

The samples are episodes of an ordinary episode store, in proclab's timestep convention
(:mod:`proclab.store.schema`), so the analyses read them like recordings:

* per step: ``obs`` (the predicted frame the agent saw), ``action``, ``logits`` (=
  ``logits_clean``), ``value``, ``state_out/<layer>``, the predicted reward of the action
  (under the field the model was trained on, ``reward_norm`` or ``reward``), ``terminated``
  (done probability > 0.5), ``done_prob``, ``truncated`` (False), ``step``, and ``env_h``
  (the RSSM's deterministic state at that frame);
* per episode: ``bottleneck``, ``init``, ``source_episode``/``source_offset`` (-1 for random
  init), ``game``, ``return`` (predicted), ``state_in0/<layer>`` and ``final_obs`` (the
  simulator renders the frame after the last action, which Procgen never does).

The model predicts the reward and done flag of an action on the *next* frame, so a sample of
``T`` steps simulates ``T + 1``. ``--agent`` puts another agent in the loop (``untrained``: a
fresh one of the same architecture; ``always-right`` etc.: a scripted one; or another agent),
starting from its own initial state, to show that the environment model does not depend on
the agent it was trained with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from proclab.errors import ProclabError, unknown_choice
from proclab.io.progress import progress_bar
from proclab.io.video import write_video
from proclab.run.runtime import RuntimeConfig
from proclab.store import EpisodeStore, ShardWriter
from proclab.store.schema import STATE_LAYOUT_ATTR, STATE_OUT
from proclab.store.state_codec import StateCodec
from proclab.worldmodel.checkpoint import TrainedWorldModel
from proclab.worldmodel.dream import INITS, Dream, DreamStarts, loop_agent, simulate_batch
from proclab.worldmodel.model import Trajectory


@dataclass(frozen=True)
class SamplingSettings:
    """How :func:`sample_rollouts` simulates (``proclab wm sample``'s options of these names)."""

    n: int = 100  # number of simulated rollouts
    init: str = "informed"  # informed (encoded real initial frames) or random (a random unit vector)
    steps: int = 10  # steps per rollout
    videos: int = 8  # write mp4s of the first K rollouts
    agent: str = "trained"  # in the loop: trained, untrained, a scripted one, or another agent (a run)
    modal: bool = True  # take the argmax of every categorical (deterministic rollouts); False samples them
    greedy: bool = True  # the agent takes its most likely action; False samples its policy
    batch_size: int = 64  # rollouts simulated at once
    seed: int = 0  # seed of the initial frames' choice, random vectors and samples


def step_fields(reward_field: str, codec: StateCodec) -> list[str]:
    """Per-step fields of a simulated rollout (see the module docstring)."""
    names = [
        "obs",
        "action",
        "logits",
        "logits_clean",
        "value",
        reward_field,
        "terminated",
        "done_prob",
        "truncated",
        "step",
        "env_h",
    ]
    return names + codec.store_fields(STATE_OUT)


def _check_joinable(out: Path, names: list[str]) -> None:
    """Samples may join an existing store only if they have the same fields (same agent state layout)."""
    if not (out / "zarr.json").is_file():
        return
    existing = EpisodeStore(out)
    if existing.shards and set(existing.step_fields) != set(names):
        raise ProclabError(
            f"episode store {str(out)!r} holds episodes with other fields (another agent in the loop, or not "
            f"samples); write these samples to another --out"
        )


def sample_rollouts(
    wm_path: Path,
    out: Path,
    settings: SamplingSettings,
    runtime: RuntimeConfig,
    *,
    data: Path | None = None,
    progress: bool = True,
) -> Path:
    """Simulate ``settings.n`` rollouts of the world model ``wm_path`` (a run or checkpoint directory) on ``runtime``
    into the store ``out``, informed by the store ``data`` (default: the one the model was trained on); returns
    ``out``."""
    if settings.init not in INITS:
        raise unknown_choice("init", settings.init, INITS)
    for name in ("n", "steps", "batch_size"):
        if getattr(settings, name) < 1:
            raise ProclabError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(settings, name)}")
    rt = runtime.runtime()
    world = TrainedWorldModel.load(wm_path, runtime=rt)
    wm, ckpt = world.model, world.checkpoint
    agent, predicted_state = loop_agent(settings.agent, world.agent, settings.seed, rt)
    codec = StateCodec(agent.state_shapes())
    reward_field = ckpt.meta["reward_field"]
    games = ckpt.meta.get("games") or ["unknown"]
    if settings.init == "informed":
        data = data or Path(ckpt.meta["data"])
        starts = DreamStarts.informed(data, settings.n, wm.config.num_init_steps, settings.seed)
        store = starts.windows.store
    else:
        starts = DreamStarts.random(settings.n, wm.config.bottleneck, settings.seed)
    torch.manual_seed(settings.seed)
    layout = {k: [[key, list(s)] for key, s in v] for k, v in codec.layout.items()}
    simulation = {
        "checkpoint": str(ckpt.path),
        "step": ckpt.step,
        "init": settings.init,
        "steps": settings.steps,
        "agent": settings.agent,
        "modal": settings.modal,
        "greedy": settings.greedy,
        "seed": settings.seed,
        "precision": "bf16" if rt.bf16 else "fp32",
        "created": time.time(),
    }
    _check_joinable(out, step_fields(reward_field, codec))
    writer = ShardWriter(out, attrs={"simulation": simulation, STATE_LAYOUT_ATTR: layout})
    with progress_bar(transient=True, disable=not progress) as bar, writer, torch.no_grad():
        task = bar.add_task("wm sample", total=settings.n)
        for lo in range(0, settings.n, settings.batch_size):
            hi = min(lo + settings.batch_size, settings.n)
            with rt.autocast():
                bottleneck = starts.bottlenecks(wm, lo, hi, rt.device)
            traj = simulate_batch(
                world,
                agent,
                bottleneck,
                settings.steps,
                modal=settings.modal,
                greedy=settings.greedy,
                predicted_agent_state=predicted_state,
            )
            dreams = Dream.of(traj, settings.steps, reward_field)
            for k in range(lo, hi):
                steps, info = dreams.episode(k - lo, codec)
                if settings.init == "informed":
                    e = int(starts.windows.episode_ids[starts.picks[k]])
                    game = str(store.episodes["game"][e]) if "game" in store.episodes else games[0]
                    info |= {
                        "source_episode": e,
                        "source_offset": int(starts.windows.offsets[starts.picks[k]]),
                        "game": game,
                    }
                else:
                    info |= {"source_episode": -1, "source_offset": -1, "game": "+".join(games)}
                writer.append(steps, {"init": settings.init, **info})
                if k < settings.videos:
                    sample_video(out / "videos" / f"sample_{k:05d}.mp4", steps, reward_field)
            bar.update(task, completed=hi)
    return out


def rollouts(traj: Trajectory, steps: int, reward_field: str, codec: StateCodec) -> list[tuple[dict, dict]]:
    """A closed-loop simulation of ``steps + 1`` steps as one (per-step, per-episode) pair of fields per row
    (:meth:`~.dream.Dream.episode`): row ``t`` holds frame ``t`` and the agent's outputs on it; the reward and
    done of its action come from step ``t + 1``, whose frame is the episode's ``final_obs``."""
    dreams = Dream.of(traj, steps, reward_field)
    return [dreams.episode(b, codec) for b in range(len(dreams))]


def sample_video(path: Path, steps: dict, reward_field: str) -> Path:
    """The rollout as the agent saw it, with its action, value, and the predicted reward and done."""
    captions = [
        [f"v {v:+.2f}", f"r {r:+.2f} done {d:.2f}"]
        for v, r, d in zip(steps["value"], steps[reward_field], steps["done_prob"], strict=True)
    ]
    return write_video(path, steps["obs"], fps=8, scale=4, actions=steps["action"], captions=captions)
