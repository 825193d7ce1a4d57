"""The acting step (forward pass + action sampling) as one function, replayed as a CUDA graph.

Acting runs the agent on a few dozen observations per env step. On a GPU that is about 2 ms of
kernel launches and host work for microseconds of arithmetic (docs/gpu.md): :class:`ActingStep`
captures the whole step for a fixed batch once, and each env step replays it with one launch.

Sampling takes its randomness as an input, one uniform number per env drawn by the caller
(:func:`sample_from_uniform`): an env's action then depends on its logits and its number only,
not on the batch it was computed in nor on how many random numbers were drawn before it. That is
what lets a collector compute the envs in groups, in any order, and fill the same rollout.
"""

from __future__ import annotations

import contextlib

import torch

from proclab.run.runtime import Runtime


def sample_from_uniform(logits: torch.Tensor, uniform: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Actions and their log-probabilities by inverse-CDF sampling (in fp32).

    Action ``k`` is the one whose interval ``[cdf[k-1], cdf[k])`` holds ``uniform * cdf[-1]``, which
    happens with probability ``p[k]``; a zero-probability action has an empty interval.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    cdf = logp.exp().cumsum(-1)
    below = cdf <= uniform.unsqueeze(-1) * cdf[:, -1:]
    action = below.sum(-1).clamp_max(logits.shape[-1] - 1)
    return action, logp.gather(-1, action.unsqueeze(-1)).squeeze(-1)


class ActingStep:
    """``(obs, first, prev_reward, state, uniform) -> (action, logprob, value, next_state)`` for a
    fixed batch of ``n`` envs: a CUDA graph on a CUDA device, the same computation run eagerly
    elsewhere.

    The graph reads the agent's parameters where they are, so optimiser steps and loaded weights
    (both in place) are seen by the next replay. Its outputs are its own static tensors: they hold
    until the next call, so copy what must outlive it.
    """

    def __init__(self, agent: torch.nn.Module, runtime: Runtime, n: int):
        self.agent, self.rt = agent, runtime
        self.graph: torch.cuda.CUDAGraph | None = None
        if runtime.device.type == "cuda":
            self._capture(n)

    def _autocast(self):
        # Autocast's weight-cast cache would hold tensors made outside the graph's memory pool.
        if not self.rt.bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.rt.device.type, dtype=torch.bfloat16, cache_enabled=False)

    def _compute(self, obs, first, prev_reward, state, uniform):
        with torch.no_grad(), self._autocast():
            out, next_state = self.agent.step(obs, state, first, prev_reward)
        action, logprob = sample_from_uniform(out.logits, uniform)
        return action, logprob, out.value.float(), next_state

    def _capture(self, n: int) -> None:
        dev = self.rt.device
        obs = torch.zeros(n, 3, 64, 64, dtype=torch.uint8, device=dev)
        self.inputs = (
            obs.contiguous(memory_format=torch.channels_last),
            torch.zeros(n, dtype=torch.bool, device=dev),
            torch.zeros(n, device=dev),
            self.agent.initial_state(n, device=dev),
            torch.full((n,), 0.5, device=dev),
        )
        side = torch.cuda.Stream(dev)  # warm-up (cuDNN's autotuning) off the capturing stream
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(3):
                self._compute(*self.inputs)
        torch.cuda.current_stream(dev).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outputs = self._compute(*self.inputs)

    def __call__(self, obs, first, prev_reward, state, uniform):
        if self.graph is None:
            return self._compute(obs, first, prev_reward, state, uniform)
        static_obs, static_first, static_prev, static_state, static_uniform = self.inputs
        for dst, src in (
            (static_obs, obs),
            (static_first, first),
            (static_prev, prev_reward),
            (static_uniform, uniform),
        ):
            dst.copy_(src, non_blocking=True)
        for key, dst in static_state.items():
            dst.copy_(state[key], non_blocking=True)
        self.graph.replay()
        return self.outputs
