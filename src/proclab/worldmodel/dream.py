"""Dreams: the agent acting in its world model, as arrays to look at (:func:`dream`, ``proclab wm sample``).

A dream starts from a bottleneck vector, **informed** (the encoding of ``num_init_steps`` real frames of a
window of a store, by default the one the model was trained on) or **random** (uniform on the unit sphere),
or from vectors the caller gives. The converters give the initial environment state, agent state and
previous action; every predicted frame goes through the agent, whose action drives the next step (closed
loop; :func:`~.simulate.dreamed`). Everything is modal by default (argmax of each categorical, the agent's
most likely action), so a dream is a function of its start and seed.

A :class:`Dream` holds ``T`` steps of ``B`` dreams, batch-first, in proclab's timestep convention: row
``t`` is the frame the agent saw, the action it took, and the reward and done probability the model
predicts for that action, which it predicts on the *next* frame; so a dream of ``T`` steps simulates
``T + 1``, whose last frame is ``final_frames``. ``wm sample`` writes the same rows to an episode store
(:meth:`Dream.episode`), so ``dream()`` in a notebook and ``wm sample`` on the command line give the same
numbers for the same start and seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from proclab.envs.actions import ACTION_NAMES
from proclab.errors import ProclabError, unknown_choice
from proclab.io.files import subplots
from proclab.io.results import Result
from proclab.models import Agent, build_agent
from proclab.models.loading import freeze, load_agent
from proclab.models.scripted import SCRIPTED, ScriptedAgent
from proclab.store import EpisodeStore
from proclab.store.schema import STATE_IN0, STATE_OUT
from proclab.store.state_codec import StateCodec
from proclab.store.windows import WindowDataset
from proclab.worldmodel.checkpoint import TrainedWorldModel, as_trained
from proclab.worldmodel.model import Trajectory, WorldModel
from proclab.worldmodel.simulate import dreamed, random_bottlenecks
from proclab.worldmodel.videos import to_uint8

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

INITS = ("informed", "random")


@dataclass(frozen=True, repr=False)
class Dream(Result):
    """``B`` dreams of ``T`` steps (module docstring); every array is batch-first."""

    frames: np.ndarray
    """``(B, T, 3, 64, 64)`` uint8: the frame the agent saw at each step."""
    actions: np.ndarray
    """``(B, T)``: the action it took."""
    logits: np.ndarray
    """``(B, T, A)``: its policy's logits."""
    values: np.ndarray
    """``(B, T)``: its value estimate."""
    rewards: np.ndarray
    """``(B, T)``: the reward the model predicts for each action (its :attr:`reward_field`)."""
    done_prob: np.ndarray
    """``(B, T)``: the predicted chance that the action ended the episode."""
    agent_states: np.ndarray
    """``(B, T, D)``: the agent's state leaving each step, flat in the store's layout."""
    env_h: np.ndarray
    """``(B, T, H)``: the simulator's deterministic state at each frame."""
    final_frames: np.ndarray
    """``(B, 3, 64, 64)``: the frame after the last action (Procgen never renders it; the model does)."""
    initial_agent_states: np.ndarray
    """``(B, D)``: the agent's state entering step 0."""
    bottlenecks: np.ndarray
    """``(B, L)``: the vectors the dreams started from."""
    reward_field: str
    """``reward_norm`` or ``reward``: the reward the model was trained to predict."""
    source_episodes: np.ndarray
    """``(B,)``: the store episode an informed dream started in (-1 for other starts)."""
    source_offsets: np.ndarray
    """``(B,)``: the step of that episode its window started at (-1 for other starts)."""
    real_frames: np.ndarray | None = None
    """``(B, num_init_steps, 3, 64, 64)`` uint8: the real frames an informed dream's bottleneck encodes (the
    last is the one its step 0 redraws), else None."""
    copied_real_frame: bool = False
    """Whether step 0 copied the real frame before it (``dream(..., copy_real_frame=True)``)."""

    @classmethod
    def of(
        cls,
        traj: Trajectory,
        steps: int,
        reward_field: str,
        source_episodes: np.ndarray | None = None,
        source_offsets: np.ndarray | None = None,
        real_frames: np.ndarray | None = None,
        copied_real_frame: bool = False,
    ) -> Dream:
        """The first ``steps`` rows of a closed-loop simulation of ``steps + 1`` steps."""

        def numpy(x: Tensor) -> np.ndarray:  # time-major (S, B, ...) -> batch-first
            return np.swapaxes(x.float().cpu().numpy(), 0, 1)

        T, B = steps, traj.frame.shape[1]
        frames = np.swapaxes(to_uint8(traj.frame), 0, 1)
        reward, done = numpy(traj.reward), numpy(torch.sigmoid(traj.done_logit.float()))
        missing = np.full(B, -1, np.int64)
        return cls(
            frames=frames[:, :T],
            actions=np.swapaxes(traj.action.argmax(-1).cpu().numpy(), 0, 1)[:, :T],
            logits=numpy(traj.logits)[:, :T],
            values=numpy(traj.value)[:, :T],
            rewards=reward[:, 1:],
            done_prob=done[:, 1:],
            agent_states=numpy(traj.agent_state)[:, :T],
            env_h=numpy(traj.env_h)[:, :T],
            final_frames=frames[:, T],
            initial_agent_states=traj.start.agent_state.float().cpu().numpy(),
            bottlenecks=traj.start.bottleneck.float().cpu().numpy(),
            reward_field=reward_field,
            source_episodes=missing if source_episodes is None else np.asarray(source_episodes, np.int64),
            source_offsets=missing if source_offsets is None else np.asarray(source_offsets, np.int64),
            real_frames=real_frames,
            copied_real_frame=copied_real_frame,
        )

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def steps(self) -> int:
        return self.frames.shape[1]

    @property
    def returns(self) -> np.ndarray:
        """``(B,)``: each dream's predicted return (its rewards summed)."""
        return self.rewards.sum(1)

    def episode(self, b: int, codec: StateCodec) -> tuple[dict, dict]:
        """Dream ``b`` as an episode of a store: its per-step and per-episode fields (``wm sample``'s)."""
        T = self.steps
        row = {
            "obs": self.frames[b],
            "action": self.actions[b],
            "logits": self.logits[b],
            "logits_clean": self.logits[b],
            "value": self.values[b],
            self.reward_field: self.rewards[b],
            "terminated": self.done_prob[b] > 0.5,
            "done_prob": self.done_prob[b],
            "truncated": np.zeros(T, bool),
            "step": np.arange(T, dtype=np.int32),
            "env_h": self.env_h[b],
        }
        info = {
            "bottleneck": self.bottlenecks[b],
            "return": float(self.rewards[b].sum()),
            "final_obs": self.final_frames[b],
        }
        for layer, part in codec.layer_slices().items():
            row[STATE_OUT + layer] = self.agent_states[b, :, part]
            info[STATE_IN0 + layer] = self.initial_agent_states[b, part]
        return row, info

    def table(self) -> list[dict]:
        """One row per dream: where it started, its predicted return, when it predicts the end, its actions."""
        rows = []
        for b in range(len(self)):
            ends = np.flatnonzero(self.done_prob[b] > 0.5)
            actions = [ACTION_NAMES[a] for a in self.actions[b]]
            rows.append(
                {
                    "dream": b,
                    "episode": int(self.source_episodes[b]) if self.source_episodes[b] >= 0 else None,
                    "step": int(self.source_offsets[b]) if self.source_offsets[b] >= 0 else None,
                    "predicted return": float(self.rewards[b].sum()),
                    "done at": int(ends[0]) if len(ends) else None,
                    "actions": " ".join(actions),
                }
            )
        return rows

    def plot(self, ax: Axes | None = None, dreams: int = 4, every: int = 1) -> Figure:
        """A strip of frames per dream (the first ``dreams``; every ``every``-th step), an informed dream's
        real frame at step 0 first, so that what the model made of it shows beside it."""
        if ax is not None:
            raise ProclabError("Dream.plot draws its own grid of frames; call it without ax")
        shown = range(min(dreams, len(self)))
        steps = list(range(0, self.steps, every))
        columns = ([("real", None)] if self.real_frames is not None else []) + [(f"t={t}", t) for t in steps]
        fig, axes = subplots(
            len(shown), len(columns), figsize=(1.1 * len(columns), 1.4 * len(shown)), squeeze=False
        )
        for b in shown:
            for c, (title, t) in enumerate(columns):
                frame = self.real_frames[b, -1] if t is None else self.frames[b, t]
                cell = axes[b][c]
                cell.imshow(frame.transpose(1, 2, 0))
                cell.set_xticks([])
                cell.set_yticks([])
                if b == 0:
                    cell.set_title(title, fontsize=8)
                if t is not None and t < self.steps:
                    cell.set_xlabel(ACTION_NAMES[self.actions[b, t]], fontsize=6)
            axes[b][0].set_ylabel(f"dream {b}", fontsize=8)
        fig.tight_layout(pad=0.3, h_pad=0.6)
        return fig


def loop_agent(agent: str | Agent | None, trained: Agent, seed: int, runtime) -> tuple[Agent, bool]:
    """The agent to put in the loop, and whether the converters' predicted initial state suits it:
    None or ``trained`` (the model's own), ``untrained`` (a fresh one of its architecture), a scripted
    direction (``always-right``, ...), a checkpoint path, or an agent already loaded."""
    if agent is None or agent == "trained":
        return trained, True
    if agent == "untrained":
        torch.manual_seed(seed)
        return freeze(runtime.prepare(build_agent(trained.config))), False
    if isinstance(agent, str) and agent in SCRIPTED:
        return ScriptedAgent(SCRIPTED[agent], trained.config.num_actions), False
    if isinstance(agent, str | Path):
        if not Path(agent).exists():
            raise unknown_choice(
                "agent", str(agent), ["trained", "untrained", *SCRIPTED, "a run or checkpoint directory"]
            )
        agent = load_agent(agent, runtime)[0]
    if agent.config.num_actions != trained.config.num_actions:
        raise ProclabError(
            f"the agent has {agent.config.num_actions} actions; the model simulates {trained.config.num_actions}"
        )
    return agent, False


@dataclass(frozen=True)
class DreamStarts:
    """Where ``n`` dreams start: windows of a store (informed) or vectors, handed out batch by batch."""

    vectors: Tensor | None = None
    windows: WindowDataset | None = None
    picks: np.ndarray | None = None

    @classmethod
    def informed(cls, data: Path, n: int, num_init_steps: int, seed: int) -> DreamStarts:
        """``n`` windows of ``num_init_steps`` frames of the store ``data``, a seeded pick (with
        replacement only where the store has fewer windows than ``n``)."""
        windows = WindowDataset(data, num_init_steps, stride=1, fields=["obs"])
        rng = np.random.default_rng(seed)
        return cls(windows=windows, picks=rng.choice(len(windows), n, replace=n > len(windows)))

    @classmethod
    def random(cls, n: int, size: int, seed: int) -> DreamStarts:
        """``n`` vectors uniformly distributed on the unit sphere (the seed's "random init")."""
        return cls(vectors=random_bottlenecks(n, size, torch.Generator().manual_seed(seed)))

    def window_frames(self, lo: int, hi: int) -> Tensor:
        """The real frames of informed starts ``lo .. hi - 1``, time-major ``(num_init_steps, B, 3, 64, 64)``."""
        return torch.stack([self.windows[int(i)]["obs"] for i in self.picks[lo:hi]], 1)

    def bottlenecks(self, wm: WorldModel, lo: int, hi: int, device, frames: Tensor | None = None) -> Tensor:
        """Starts ``lo .. hi - 1`` as bottleneck vectors: informed ones encoded by ``wm`` (from ``frames``, their
        :meth:`window_frames`, when the caller has read them already)."""
        if self.windows is None:
            return self.vectors[lo:hi].to(device)
        return wm.encode((self.window_frames(lo, hi) if frames is None else frames).to(device))

    def sources(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
        """The store episode and window offset of starts ``lo .. hi - 1`` (None, None for vectors)."""
        if self.windows is None:
            return None, None
        return self.windows.episode_ids[self.picks[lo:hi]], self.windows.offsets[self.picks[lo:hi]]


def simulate_batch(
    world_model: TrainedWorldModel,
    agent: Agent,
    bottleneck: Tensor,
    steps: int,
    *,
    modal: bool,
    greedy: bool,
    predicted_agent_state: bool,
    start_frame: Tensor | None = None,
) -> Trajectory:
    """One batch of dreams of ``steps`` rows (``steps + 1`` simulated: the last action's reward and done)."""
    with world_model.runtime.autocast():
        return dreamed(
            world_model.model,
            agent,
            bottleneck,
            steps + 1,
            modal=modal,
            greedy=greedy,
            predicted_agent_state=predicted_agent_state,
            start_frame=start_frame,
        )


@torch.no_grad()
def dream(
    world_model: TrainedWorldModel | str | Path,
    agent: str | Agent | None = None,
    *,
    start: str | np.ndarray | Tensor = "informed",
    data: EpisodeStore | str | Path | None = None,
    n: int = 8,
    steps: int = 10,
    seed: int = 0,
    modal: bool = True,
    greedy: bool = True,
    copy_real_frame: bool = False,
    batch_size: int = 64,
) -> Dream:
    """``n`` dreams of ``steps`` steps of ``agent`` (default: the model's own) in ``world_model``.

    ``start``: ``informed`` (encode real windows of ``data``, default the store the model was trained on),
    ``random`` (vectors on the unit sphere), or bottleneck vectors ``(n, L)`` (``n`` is then their number).
    ``agent``: None (the model's own, starting from the state the converters predict), ``untrained``, a
    scripted direction such as ``always-right``, a checkpoint path or a loaded agent (these start from
    their own initial state). ``modal=False`` samples the latents, ``greedy=False`` the agent's policy.
    ``copy_real_frame``: informed starts only, hand a copy-path decoder (the ``cpu`` size) the real frame
    before step 0 to copy (``dreamed(..., start_frame=)``); off, step 0 is drawn from the state alone, as
    ``wm sample`` and the saliency's re-simulations draw it, so that the bottleneck describes the whole
    dream.
    """
    world = as_trained(world_model)
    wm, rt = world.model, world.runtime
    if isinstance(start, str):
        if start not in INITS:
            raise unknown_choice("start", start, [*INITS, "an (n, L) array of bottleneck vectors"])
        if start == "informed":
            path = data.path if isinstance(data, EpisodeStore) else Path(data or world.data)
            starts = DreamStarts.informed(path, n, wm.config.num_init_steps, seed)
        else:
            starts = DreamStarts.random(n, wm.config.bottleneck, seed)
    else:
        vectors = torch.as_tensor(np.asarray(start, np.float32) if isinstance(start, np.ndarray) else start)
        if vectors.ndim != 2 or vectors.shape[1] != wm.config.bottleneck:
            raise ProclabError(
                f"start vectors must be (n, {wm.config.bottleneck}), got {tuple(vectors.shape)}"
            )
        starts, n = DreamStarts(vectors=vectors.float()), len(vectors)
    if copy_real_frame and (starts.windows is None or wm.config.num_init_steps < 2):
        raise ProclabError("copy_real_frame needs informed starts of two or more real frames (one to copy)")
    if min(n, steps, batch_size) < 1:
        raise ProclabError(f"n, steps and batch_size must be >= 1, got {n}, {steps} and {batch_size}")
    loop, predicted_state = loop_agent(agent, world.agent, seed, rt)
    torch.manual_seed(seed)
    parts = []
    for lo in range(0, n, batch_size):
        hi = min(lo + batch_size, n)
        real = None if starts.windows is None else starts.window_frames(lo, hi)
        with rt.autocast():
            bottleneck = starts.bottlenecks(wm, lo, hi, rt.device, real)
        traj = simulate_batch(
            world,
            loop,
            bottleneck,
            steps,
            modal=modal,
            greedy=greedy,
            predicted_agent_state=predicted_state,
            start_frame=real[-2].to(rt.device) if copy_real_frame else None,
        )
        episodes, offsets = starts.sources(lo, hi)
        encoded = None if real is None else real.transpose(0, 1).numpy()
        parts.append(Dream.of(traj, steps, world.reward_field, episodes, offsets, encoded, copy_real_frame))
    return parts[0] if len(parts) == 1 else _joined(parts)


def _joined(parts: list[Dream]) -> Dream:
    """Batches of dreams as one: every array concatenated along the dreams."""
    first = parts[0]
    fields = {}
    for name, value in vars(first).items():
        if isinstance(value, np.ndarray):
            fields[name] = np.concatenate([getattr(p, name) for p in parts])
        else:
            fields[name] = value
    return Dream(**fields)
