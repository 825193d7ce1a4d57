"""Acting for training on a GPU (``--acting graph`` or ``overlap``): graphed acting steps, one half of
the envs stepping while the other half's actions are computed.

:class:`GroupedActor` fills the same :class:`~proclab.rl.rollout.Rollout` as
:class:`~proclab.rl.rollout.Actor` (same timestep convention, same carried state for checkpoints,
validation and evaluation), but computes it in groups of envs:

* each group's forward pass and sampling is one :class:`~proclab.rl.acting_graph.ActingStep`
  (a CUDA graph replay on a GPU), with randomness drawn once per rollout, one uniform number
  per env and step, so the actions do not depend on the grouping;
* with a :class:`~proclab.envs.halves.HalvedVecEnv` the groups are its two halves, and a half's
  env step runs in a worker thread (procgen releases the GIL) while the main thread computes
  the other half's actions: env stepping and inference overlap, the algorithm is unchanged;
* per-step host data (first flags, rewards, dones) stays in host arrays and moves to the device
  once per rollout; observations go through pinned buffers; the one host sync per group and
  step is the copy of its actions, which the env needs.

Reward normalisation is applied once per whole step, after both halves of it are in, so the
normaliser sees the same batches in the same order as under ``Actor`` (tests/rl/test_overlap.py
checks that the rollouts are the same as a plain step-by-step loop's).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from proclab.envs import RewardNormalizer
from proclab.envs.halves import HalvedVecEnv, join_info
from proclab.rl.acting_graph import ActingStep
from proclab.rl.rollout import Actor, Rollout
from proclab.run.runtime import Runtime


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


class GroupedActor(Actor):
    """An :class:`Actor` whose :meth:`collect` computes its envs in groups (module docstring)."""

    def __init__(self, env, agent, runtime: Runtime):
        super().__init__(env, agent, runtime)
        self.norm = env if isinstance(env, RewardNormalizer) else None
        self.raw_env = env.env if self.norm is not None else env
        halves = isinstance(self.raw_env, HalvedVecEnv)
        self.groups = self.raw_env.rows if halves else [slice(0, env.num_envs)]
        self.steps = [ActingStep(agent, runtime, g.stop - g.start) for g in self.groups]
        self.pool = ThreadPoolExecutor(2, thread_name_prefix="proclab-env") if halves else None
        pin = runtime.device.type == "cuda"
        self.staging = torch.empty(env.num_envs, 64, 64, 3, dtype=torch.uint8, pin_memory=pin)
        self.host_first = torch.empty(env.num_envs, dtype=torch.bool, pin_memory=pin)
        self.host_prev = torch.empty(env.num_envs, pin_memory=pin)
        self.host_action = torch.empty(env.num_envs, dtype=torch.int64, pin_memory=pin)

    def close(self) -> None:
        """Stop the env-stepping threads, then close the envs."""
        if self.pool is not None:
            self.pool.shutdown()
        super().close()

    def _step_group(self, g: int, actions: np.ndarray):
        if self.pool is None:
            return _done(self.raw_env.step(actions))
        return self.pool.submit(self.raw_env.step_half, g, actions)

    def _upload_obs(self, rows: slice, obs: np.ndarray, device_obs: torch.Tensor) -> None:
        """Env frames (a channels-first view of HWC memory) -> pinned buffer -> device rows."""
        self.staging[rows].numpy()[:] = obs.transpose(0, 2, 3, 1)
        device_obs[rows].copy_(self.staging[rows].permute(0, 3, 1, 2), non_blocking=True)

    def collect(self, rollout: Rollout, on_info=None, teacher=None) -> None:
        """Fill ``rollout`` with the next ``rollout.num_steps`` steps; bootstrap value included (no
        ``teacher``: the config refuses one with grouped acting)."""
        assert teacher is None, "a teacher labels states with --acting eager only"
        T, N, dev = rollout.num_steps, self.env.num_envs, self.rt.device
        rollout.initial_state = {k: v.clone() for k, v in self.state.items()}
        uniform = torch.rand(T, N, device=dev)
        obs = self.obs.clone(memory_format=torch.channels_last)
        first, prev = self.host_first.numpy(), self.host_prev.numpy()
        first[:], prev[:] = self.first.cpu().numpy(), self.prev_reward.cpu().numpy()
        host = {k: np.zeros((T, N), np.float32) for k in ("prev_rewards", "rewards", "raw")}
        host |= {k: np.zeros((T, N), bool) for k in ("firsts", "dones")}
        states = [{k: v[rows] for k, v in self.state.items()} for rows in self.groups]
        pending: list[Future | None] = [None] * len(self.groups)
        infos: list[dict] = []
        for t in range(T + 1):
            for g, rows in enumerate(self.groups):
                if pending[g] is not None:  # the group's env step t - 1 is in: its results
                    infos.append(self._receive(rows, pending[g].result(), obs, host, t - 1))
                    if len(infos) == len(self.groups):
                        self._finish_step(host, infos, t - 1, on_info)
                        infos = []
                if t == T:
                    continue
                rollout.obs[t, rows] = obs[rows]
                host["firsts"][t, rows], host["prev_rewards"][t, rows] = first[rows], prev[rows]
                action, logprob, value, states[g] = self.steps[g](
                    obs[rows], self.host_first[rows], self.host_prev[rows], states[g], uniform[t, rows]
                )
                rollout.actions[t, rows], rollout.logprobs[t, rows], rollout.values[t, rows] = (
                    action,
                    logprob,
                    value,
                )
                self.host_action[rows].copy_(action)  # the one sync: the env needs the actions
                pending[g] = self._step_group(g, self.host_action[rows].numpy().copy())
        for key in ("firsts", "prev_rewards", "rewards", "dones"):
            getattr(rollout, key).copy_(torch.from_numpy(host[key]))
        self.obs = obs
        self.first = torch.from_numpy(first.copy()).to(dev)
        self.prev_reward = torch.from_numpy(prev.copy()).to(dev)
        self.state = {k: torch.cat([s[k] for s in states]) for k in self.state}
        out, _ = self.forward()  # V(obs_T) for bootstrapping
        rollout.next_obs, rollout.next_first = self.obs, self.first
        rollout.next_value = out.value.float()

    def _receive(self, rows: slice, result, obs: torch.Tensor, host: dict, t: int) -> dict:
        """Take one group's env step ``t``: its next observations, first flags and previous rewards."""
        frames, reward, terminated, truncated, info = result
        done = terminated | truncated
        raw = reward if self.norm is not None else info.get("raw_reward", reward)
        host["raw"][t, rows], host["rewards"][t, rows], host["dones"][t, rows] = raw, reward, done
        self.host_first[rows].numpy()[:] = done
        self.host_prev[rows].numpy()[:] = np.where(done, 0.0, raw) if self.prev_reward_reset else raw
        self._upload_obs(rows, frames, obs)
        return info

    def _finish_step(self, host: dict, infos: list[dict], t: int, on_info) -> None:
        """Every group of step ``t`` is in: normalise its rewards as one batch, report its info."""
        info = infos[0] if len(infos) == 1 else join_info(*infos)
        if self.norm is not None:
            info["raw_reward"] = host["raw"][t].copy()
            host["rewards"][t] = self.norm.normalize(host["raw"][t], host["dones"][t])
        if on_info is not None:
            on_info(info)
