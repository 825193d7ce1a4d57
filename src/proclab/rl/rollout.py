"""Rollout storage and the acting loop that fills it.

A :class:`Rollout` holds ``num_steps`` consecutive steps of ``num_envs`` envs, time-major,
following the timestep convention of :mod:`proclab.rl.gae`, plus what the learner needs to
replay it: ``firsts[t]`` (obs_t starts an episode, so the agent resets its state before it)
and ``initial_state``, the agent state entering step 0. Recurrent PPO and IMPALA both unroll
the agent from that stored state over the rollout's observations.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

from proclab.envs import NOOP
from proclab.run.runtime import Runtime


@dataclass
class Rollout:
    obs: torch.Tensor  # (T, N, 3, 64, 64) uint8
    firsts: torch.Tensor  # (T, N) bool: obs_t is an episode's first frame
    actions: torch.Tensor  # (T, N) int64
    logprobs: torch.Tensor  # (T, N) log pi(a_t | obs_t) under the acting policy
    values: torch.Tensor  # (T, N) V(obs_t)
    rewards: torch.Tensor  # (T, N) reward earned by a_t (normalised if reward normalisation is on)
    prev_rewards: torch.Tensor  # (T, N) raw reward that arrived with obs_t (at episode starts: 0, or the
    # last episode's final reward if the agent's config.prev_reward_reset is off)
    dones: torch.Tensor  # (T, N) bool: episode ended after a_t
    initial_state: dict[str, torch.Tensor]  # agent state entering step 0, batch-first
    next_obs: torch.Tensor | None = None  # obs_T, first_T and V(obs_T): where the next rollout starts
    next_first: torch.Tensor | None = None
    next_value: torch.Tensor | None = None
    # (T, N) int64: a teacher's action in obs_t's state (kickstarting)
    teacher_actions: torch.Tensor | None = None

    @classmethod
    def allocate(cls, num_steps: int, num_envs: int, device: torch.device) -> Rollout:
        T, N = num_steps, num_envs

        def zeros(*shape, dtype=torch.float32):
            return torch.zeros(*shape, dtype=dtype, device=device)

        obs = torch.zeros(T * N, 3, 64, 64, dtype=torch.uint8, device=device)
        obs = obs.contiguous(memory_format=torch.channels_last).view(T, N, 3, 64, 64)
        return cls(
            obs=obs,
            firsts=zeros(T, N, dtype=torch.bool),
            actions=zeros(T, N, dtype=torch.int64),
            logprobs=zeros(T, N),
            values=zeros(T, N),
            rewards=zeros(T, N),
            prev_rewards=zeros(T, N),
            dones=zeros(T, N, dtype=torch.bool),
            initial_state={},
            teacher_actions=zeros(T, N, dtype=torch.int64),
        )

    @property
    def num_steps(self) -> int:
        return self.obs.shape[0]


def sample_actions(logits: torch.Tensor, greedy: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Actions and their log-probabilities from logits (computed in fp32)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    if greedy:
        action = logp.argmax(-1)
    else:
        action = torch.multinomial(logp.exp(), 1).squeeze(-1)
    return action, logp.gather(-1, action.unsqueeze(-1)).squeeze(-1)


def _row_slices(n: int, parts: int) -> list[slice]:
    """``parts`` contiguous slices (sizes differing by at most one) covering ``n`` rows."""
    bounds = np.linspace(0, n, max(1, min(parts, n)) + 1).round().astype(int)
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds)]


class Actor:
    """Runs an agent on a vector env, keeping the env's last observation and the agent state.

    The actor owns the acting side of training (and of evaluation): it is the one place where
    observations go to the agent and actions to the env. :meth:`collect` fills a
    :class:`Rollout`; its state (observation, first flags, agent state, last raw reward) carries
    over from one rollout to the next. The last raw reward is zeroed on an episode's first frame
    unless the agent's ``config.prev_reward_reset`` is off (modern-srwm's actors).

    With ``side_by_side``, the forward pass on all envs is computed in slices of envs on the
    runtime's acting workers (one slice per core, :meth:`Runtime.map`) when its layout has them;
    the rows are independent, so the outputs are the whole batch's. Only for agents without hooks
    that collect activations (they would see the slices, from other threads).

    An agent that acts from the game state instead of the frames (a scripted planner, the known goal of
    a check of a behavioural label) defines ``watch(env)``: the actor calls it once with the env it
    plays, whose ``slot_state(i)`` is then, at every forward pass, the state of slot ``i``'s observation.
    Such an agent keeps each row's slot in its own state, which the actor slices with the rows.
    """

    def __init__(self, env, agent, runtime: Runtime, side_by_side: bool = False):
        self.env, self.agent, self.rt = env, agent, runtime
        self.slices = _row_slices(env.num_envs, runtime.acting_workers) if side_by_side else []
        self.prev_reward_reset = agent.config.prev_reward_reset
        n = env.num_envs
        obs, self.reset_info = env.reset()
        self.obs = runtime.obs_tensor(obs)
        self.first = torch.ones(n, dtype=torch.bool, device=runtime.device)
        self.prev_reward = torch.zeros(n, device=runtime.device)
        self.state = agent.initial_state(n, device=runtime.device)
        watch = getattr(agent, "watch", None)
        if watch is not None:
            watch(env)

    def close(self) -> None:
        """Close the envs now rather than at interpreter exit, where native teardown runs in no set order."""
        self.env.close()

    def use_runtime(self, runtime: Runtime) -> None:
        """Act in another layout of the same device and precision (a run following its load)."""
        self.rt = runtime
        if self.slices:
            self.slices = _row_slices(self.env.num_envs, runtime.acting_workers)

    @torch.inference_mode()
    def forward(self, rows: torch.Tensor | None = None):
        """Agent output and next state for the current observation (no action taken).

        With ``rows`` (indices), only those envs are computed; the returned state is then the
        full state with those rows replaced (evaluation skips envs that are done).
        """
        if rows is None:
            if len(self.slices) > 1:
                return self._forward_side_by_side()
            with self.rt.autocast():
                return self.agent.step(self.obs, self.state, self.first, self.prev_reward)
        sub = {k: v[rows] for k, v in self.state.items()}
        with self.rt.autocast():
            out, new = self.agent.step(self.obs[rows], sub, self.first[rows], self.prev_reward[rows])
        state = {k: v.clone() for k, v in self.state.items()}
        for k, v in new.items():
            state[k][rows] = v.to(state[k].dtype)
        return out, state

    def _forward_side_by_side(self):
        def rows(sl: slice):
            with torch.inference_mode(), self.rt.autocast():
                state = {k: v[sl] for k, v in self.state.items()}
                return self.agent.step(self.obs[sl], state, self.first[sl], self.prev_reward[sl])

        outs, states = zip(*self.rt.map(rows, self.slices, self.rt.acting_workers), strict=True)
        out = type(outs[0])(*(torch.cat(parts) for parts in zip(*outs, strict=True)))
        return out, {k: torch.cat([s[k] for s in states]) for k in states[0]}

    def act(self, greedy: bool = False, rows: torch.Tensor | None = None):
        """One step: agent output, sampled actions (no-op for envs outside ``rows``), new state."""
        out, state = self.forward(rows)
        with torch.inference_mode():
            action, logprob = sample_actions(out.logits, greedy)
            if rows is not None:
                full = torch.full((self.env.num_envs,), NOOP, dtype=action.dtype, device=action.device)
                full[rows] = action
                action = full
        return out, action, logprob, state

    def env_step(self, action: torch.Tensor, state: dict[str, torch.Tensor]):
        """Apply ``action``; update the actor's observation, first flags, state and last reward."""
        obs, reward, terminated, truncated, info = self.env.step(action.cpu().numpy())
        done = terminated | truncated
        raw = info.get("raw_reward", reward)
        self.obs = self.rt.obs_tensor(obs)
        self.first = torch.from_numpy(done).to(self.rt.device)
        prev = np.where(done, 0.0, raw) if self.prev_reward_reset else np.asarray(raw)
        self.prev_reward = torch.from_numpy(prev.astype(np.float32)).to(self.rt.device)
        self.state = state
        return reward, done, info

    def collect(self, rollout: Rollout, on_info=None, teacher=None) -> None:
        """Fill ``rollout`` with the next ``rollout.num_steps`` steps; bootstrap value included. A
        ``teacher`` (a planner: ``actions(env)``) labels each observation's state with its action."""
        rollout.initial_state = {k: v.clone() for k, v in self.state.items()}
        for t in range(rollout.num_steps):
            rollout.obs[t] = self.obs
            if teacher is not None:
                assert rollout.teacher_actions is not None, "a teacher needs a rollout from Rollout.allocate"
                rollout.teacher_actions[t] = torch.from_numpy(teacher.actions(self.env)).to(self.rt.device)
            rollout.firsts[t] = self.first
            rollout.prev_rewards[t] = self.prev_reward
            out, action, logprob, state = self.act()
            rollout.actions[t] = action
            rollout.logprobs[t] = logprob
            rollout.values[t] = out.value.float()
            reward, done, info = self.env_step(action, state)
            rollout.rewards[t] = torch.from_numpy(reward).to(self.rt.device)
            rollout.dones[t] = torch.from_numpy(done).to(self.rt.device)
            if on_info is not None:
                on_info(info)
        out, _ = self.forward()  # V(obs_T) for bootstrapping
        rollout.next_obs, rollout.next_first = self.obs, self.first
        rollout.next_value = out.value.float()
