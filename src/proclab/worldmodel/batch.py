"""Windows of an episode store -> the simulator's inputs and labels. The alignment is written down here, once.

A window holds ``L = n + S - 1`` consecutive rows of one episode (``n = num_init_steps``,
``S = num_sim_steps``), numbered from its start; ``r0 = n - 1`` is the row of the last
initial frame, which is also the first simulated frame. Rows follow the store's timestep
convention (:mod:`proclab.store.schema`: row ``t`` holds ``obs_t``, the state entering and
leaving step ``t``, ``a_t``, and the reward and ``terminated`` flag *that ``a_t`` caused*).
Simulated step ``k`` (``0 <= k < S``) consumes ``a_{k-1}`` and predicts frame ``k``, so:

======================================  ============================  ==========================
quantity                                proclab rows                  seed (spec §4.2)
======================================  ============================  ==========================
frames the encoder reads                ``obs[0 .. n-1]``             ``ims[0..2]``
agent state entering step 0 (h0 label)  ``state_in[r0]``              ``hx[2]``
previous action label (init loss)       ``action[r0 - 1]``            ``action[1]``
action driving step k (``a_{k-1}``)     ``action[r0 + k - 1]``        ``action[1 + k]``
frame label of step k                   ``obs[r0 + k]``               ``ims[2 + k]``
reward / done label of step k           ``reward[r0 + k - 1]``,       ``reward[2 + k]``,
(caused by ``a_{k-1}``)                 ``terminated[r0 + k - 1]``    ``done[2 + k]``
agent state label of step k             ``state_out[r0 + k]``         ``hx[3 + k]``
agent logits / value / action, step k   ``logits_clean``, ``value``,  (not trained)
                                        ``action`` at ``r0 + k``
======================================  ============================  ==========================

The seed's recorder put reward and done one row late, on the next frame; here they sit on the
action's row, hence the ``- 1``. Procgen renders no frame after an episode's last action
(the store holds none), so the step whose done label is True has no frame label.

**Masks.** Windows never cross episodes; rows past an episode's end are padding (``mask``
False, see :mod:`proclab.store.windows`). Image, agent and KL terms of step ``k`` count where
row ``r0 + k`` is real (``frame_mask``), reward and done where row ``r0 + k - 1`` is
(``prev_mask``). The agent-state loss also stops after the first terminal flag inside the
window (``state_mask``): in a recording that is where the episode ends anyway, and in a store
whose episodes go on after a terminal flag (a simulator's) the states after it no longer
continue the sequence the window starts with.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import Tensor

from proclab.errors import ProclabError
from proclab.store import STATE_IN, STATE_OUT, EpisodeStore
from proclab.store.state_codec import StateCodec
from proclab.store.windows import WindowDataset
from proclab.worldmodel.config import WorldModelConfig

EVAL_FIELDS = ("logits_clean", "value")
"""Read when the store has them: the recorded agent's outputs, for evaluation only."""


@dataclass
class WindowBatch:
    """A batch of windows, time-major and aligned (see the module docstring)."""

    init_frames: Tensor
    """``(n, B, 3, 64, 64)`` uint8."""
    frames: Tensor
    """``(S, B, 3, 64, 64)`` uint8: frame labels."""
    prev_actions: Tensor
    """``(S, B)`` int64: ``a_{k-1}``, the action driving step k."""
    reward: Tensor
    """``(S, B)``: reward of ``a_{k-1}``."""
    done: Tensor
    """``(S, B)`` float: 1 if the episode ended after ``a_{k-1}``."""
    agent_h0: Tensor
    """``(B, D)``: the agent's state entering step 0 (``D = 0`` for a stateless agent)."""
    agent_states: Tensor
    """``(S, B, D)``: the agent's state leaving step k."""
    actions: Tensor
    """``(S, B)`` int64: the recorded agent's action at frame k."""
    frame_mask: Tensor
    prev_mask: Tensor
    state_mask: Tensor
    logits: Tensor | None = None
    """``(S, B, A)``: the recorded agent's clean logits at frame k (if the store has them)."""
    value: Tensor | None = None
    """``(S, B)``: its value at frame k (if the store has them)."""

    @property
    def batch_size(self) -> int:
        return self.frames.shape[1]

    def prev_action_one_hot(self, num_actions: int) -> Tensor:
        return F.one_hot(self.prev_actions, num_actions).float()

    def first_steps(self, steps: int) -> WindowBatch:
        """The same windows cut to their first ``steps`` simulated steps (a horizon curriculum)."""
        if steps >= self.frames.shape[0]:
            return self
        kept = {f.name: getattr(self, f.name) for f in fields(self)}
        per_step = {k for k in kept if k not in ("init_frames", "agent_h0")}
        return WindowBatch(
            **{k: v[:steps] if k in per_step and v is not None else v for k, v in kept.items()}
        )

    def to(self, device) -> WindowBatch:
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        return WindowBatch(
            **{k: None if v is None else v.to(device, non_blocking=True) for k, v in moved.items()}
        )


def window_fields(store: EpisodeStore, codec: StateCodec, reward_field: str) -> list[str]:
    """Per-step fields a training window reads."""
    if reward_field not in store.fields:
        raise ProclabError(
            f"episode store {str(store.path)!r} has no {reward_field!r} field; "
            "use --reward-field reward or reward_norm"
        )
    names = ["obs", "action", reward_field, "terminated"]
    names += codec.store_fields(STATE_IN) + codec.store_fields(STATE_OUT)
    return names + [f for f in EVAL_FIELDS if f in store.fields]


def window_dataset(
    store: EpisodeStore,
    config: WorldModelConfig,
    codec: StateCodec,
    reward_field: str,
    stride: int = 1,
    full: bool = False,
) -> WindowDataset:
    """Windows of ``config.window`` rows; they need real initial frames (or, with ``full``, all rows)."""
    return WindowDataset(
        store,
        config.window,
        stride=stride,
        fields=window_fields(store, codec, reward_field),
        min_steps=config.window if full else config.num_init_steps,
    )


def make_batch(
    items: dict[str, Tensor], config: WorldModelConfig, codec: StateCodec, reward_field: str
) -> WindowBatch:
    """Collated windows (batch-first ``(B, L, ...)``, as a DataLoader yields them) -> :class:`WindowBatch`."""
    n, S = config.num_init_steps, config.num_sim_steps
    r0 = n - 1
    now, prev = slice(r0, r0 + S), slice(r0 - 1, r0 + S - 1)

    def tm(name: str, rows: slice) -> Tensor:  # time-major rows
        return items[name][:, rows].transpose(0, 1)

    def state(prefix: str, rows: slice) -> Tensor:
        if not codec.width:
            B = items["obs"].shape[0]
            return torch.zeros(rows.stop - rows.start, B, 0)
        return torch.cat([tm(f, rows).float() for f in codec.store_fields(prefix)], -1)

    mask = items["mask"]
    terminated = items["terminated"].bool()
    ended_before = (
        terminated.cumsum(1) - terminated.long()
    ) > 0  # a terminal on an earlier row of the window
    frame_mask = tm("mask", now)
    return WindowBatch(
        init_frames=tm("obs", slice(0, n)),
        frames=tm("obs", now),
        prev_actions=tm("action", prev).long(),
        reward=tm(reward_field, prev).float(),
        done=tm("terminated", prev).float(),
        agent_h0=state(STATE_IN, slice(r0, r0 + 1))[0],
        agent_states=state(STATE_OUT, now),
        actions=tm("action", now).long(),
        frame_mask=frame_mask,
        prev_mask=mask[:, prev].transpose(0, 1),
        state_mask=frame_mask & ~ended_before[:, now].transpose(0, 1),
        logits=tm("logits_clean", now).float() if "logits_clean" in items else None,
        value=tm("value", now).float() if "value" in items else None,
    )


def synthetic_batch(
    config: WorldModelConfig, state_width: int, batch: int, num_actions: int = 15
) -> WindowBatch:
    """Random frames, actions and labels with nothing masked: for benchmarks and tests (speed and shapes
    do not depend on the pixels)."""
    n, S = config.num_init_steps, config.num_sim_steps
    on = torch.ones(S, batch, dtype=torch.bool)
    return WindowBatch(
        init_frames=torch.randint(0, 256, (n, batch, 3, 64, 64), dtype=torch.uint8),
        frames=torch.randint(0, 256, (S, batch, 3, 64, 64), dtype=torch.uint8),
        prev_actions=torch.randint(0, num_actions, (S, batch)),
        reward=torch.randn(S, batch),
        done=torch.zeros(S, batch),
        agent_h0=torch.rand(batch, state_width),
        agent_states=torch.rand(S, batch, state_width),
        actions=torch.randint(0, num_actions, (S, batch)),
        frame_mask=on,
        prev_mask=on,
        state_mask=on,
    )
