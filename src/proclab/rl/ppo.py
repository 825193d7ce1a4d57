"""Proximal Policy Optimisation (Schulman et al. 2017) with the Procgen paper's details.

Read top to bottom: :func:`ppo_loss` is the objective on one minibatch; :class:`PPOLearner`
turns a :class:`~proclab.rl.rollout.Rollout` into GAE targets and runs ``update_epochs`` passes
of ``num_minibatches`` minibatches over it. Every detail is a field of
:class:`~proclab.rl.config.PPOConfig` and listed in docs/ppo.md:

1. GAE(gamma, lambda) advantages; returns = advantages + old values.
2. Minibatches: shuffled samples for feed-forward agents; for agents with memory, groups of
   whole env sequences replayed from the rollout's stored initial state (full BPTT).
3. Advantages normalised per minibatch (before chunking, so chunks share the statistics), or once
   per rollout (``norm_adv_scope="rollout"``, interpreting-rl-behavior).
4. Clipped surrogate policy loss; value loss clipped around the old values; entropy bonus.
5. Adam (eps 1e-5), global grad-norm clip, optional linear LR decay, optional KL early stop.
6. Several processes (torchrun): each averages its gradients with the others before a step.
7. Kickstarting (``teacher``): plus teacher_coef times the cross-entropy of the policy to a planner's
   action in each state, the coefficient decaying linearly to 0 over ``teacher_steps``.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch

from proclab.rl.config import PPOConfig
from proclab.rl.gae import gae
from proclab.rl.rollout import Rollout
from proclab.run.distributed import average_gradients
from proclab.run.runtime import Runtime, torch_threads


@dataclass
class Batch:
    """One minibatch (or chunk of one), flattened or (T, n) for sequence replay."""

    obs: torch.Tensor
    firsts: torch.Tensor
    prev_rewards: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    initial_state: dict[str, torch.Tensor] | None = None  # sequence replay only
    teacher_actions: torch.Tensor | None = None  # kickstarting only


def normalize_advantages(adv: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit (sample) standard deviation."""
    return (adv - adv.mean()) / (adv.std() + 1e-8)


def ppo_loss(
    logits: torch.Tensor, values: torch.Tensor, mb: Batch, cfg: PPOConfig, teacher_coef: float = 0.0
):
    """Total loss and its parts for new ``logits``/``values`` on minibatch ``mb`` (all fp32); with a
    ``teacher_coef``, plus that times the cross-entropy to ``mb.teacher_actions``."""
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    new_logprob = logp_all.gather(-1, mb.actions.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1).mean()

    logratio = new_logprob - mb.logprobs
    ratio = logratio.exp()
    pg_loss = torch.max(
        -mb.advantages * ratio, -mb.advantages * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)
    ).mean()

    values = values.float()
    if cfg.clip_vloss:
        v_clipped = mb.values + (values - mb.values).clamp(-cfg.clip_coef, cfg.clip_coef)
        v_loss = 0.5 * torch.max((values - mb.returns) ** 2, (v_clipped - mb.returns) ** 2).mean()
    else:
        v_loss = 0.5 * ((values - mb.returns) ** 2).mean()

    loss = pg_loss - cfg.ent_coef * entropy + cfg.vf_coef * v_loss
    teacher = {}
    if mb.teacher_actions is not None:
        cross_entropy = -logp_all.gather(-1, mb.teacher_actions.unsqueeze(-1)).mean()
        loss = loss + teacher_coef * cross_entropy
        agree = (logp_all.argmax(-1) == mb.teacher_actions).float().mean()
        teacher = {"losses/teacher_loss": cross_entropy.detach(), "losses/teacher_agreement": agree}
    with torch.no_grad():
        stats = {
            **teacher,
            "losses/policy_loss": pg_loss.detach(),
            "losses/value_loss": v_loss.detach(),
            "losses/entropy": entropy.detach(),
            "losses/approx_kl": ((ratio - 1) - logratio).mean(),  # Schulman's low-variance estimator
            "losses/old_approx_kl": (-logratio).mean(),
            "losses/clipfrac": ((ratio - 1).abs() > cfg.clip_coef).float().mean(),
        }
    return loss, stats


def accumulate_gradients(params: list[torch.Tensor], grads) -> None:
    """Add ``grads`` (``None`` for an unused parameter) to ``.grad`` as ``backward`` would: the first
    becomes the gradient (in the parameter's memory layout), later ones are added to it."""
    for p, g in zip(params, grads, strict=True):
        if g is None:
            continue
        if p.grad is None:
            p.grad = torch.empty_like(p).copy_(g)
        else:
            p.grad += g


def add_weighted(sums: dict[str, torch.Tensor], stats: dict[str, torch.Tensor], weight: float) -> None:
    for k, v in stats.items():
        sums[k] = sums.get(k, 0) + v * weight


class PPOLearner:
    """Owns the optimiser; :meth:`update` trains the agent on one rollout."""

    def __init__(
        self, agent: torch.nn.Module, cfg: PPOConfig, runtime: Runtime, total_updates: int, batch: int = 0
    ):
        """``batch``: env steps of one update (all processes), which the teacher's schedule counts in."""
        self.agent, self.cfg, self.rt = agent, cfg, runtime
        self.batch = batch
        # fused: one kernel per parameter instead of a dozen small ops (CPU; the same arithmetic)
        fused = runtime.device.type == "cpu"
        self.optimizer = torch.optim.Adam(
            agent.parameters(), lr=cfg.learning_rate, eps=cfg.adam_eps, fused=fused
        )
        self.total_updates = total_updates
        self.updates = 0
        self.recurrent = bool(agent.initial_state(1))
        self.params = [p for p in agent.parameters() if p.requires_grad]

    def learning_rate(self) -> float:
        if not self.cfg.anneal_lr:
            return self.cfg.learning_rate
        return self.cfg.learning_rate * (1.0 - self.updates / self.total_updates)

    def teacher_coef(self) -> float:
        """The teacher's weight in this update: ``teacher_coef``, decaying linearly to 0 over ``teacher_steps``."""
        cfg = self.cfg
        if cfg.teacher is None:
            return 0.0
        if not cfg.teacher_steps:
            return cfg.teacher_coef
        return cfg.teacher_coef * max(0.0, 1.0 - self.updates * self.batch / cfg.teacher_steps)

    def update(self, ro: Rollout) -> dict[str, float]:
        """One update in the runtime's layout. With workers, the passes run on them and this thread's
        own work (GAE, gathering, statistics, clipping, Adam) is small operations, which run on one
        intra-op thread: on a CPU shared with other jobs, two would stall at every operation's
        barrier (measured 30x slower for clip + Adam at load 15 on 2 cores)."""
        with torch_threads(1) if self.rt.workers > 1 else contextlib.nullcontext():
            return self._update(ro)

    def _update(self, ro: Rollout) -> dict[str, float]:
        cfg = self.cfg
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate()
        with torch.no_grad():
            advantages, returns = gae(
                ro.rewards, ro.values, ro.dones, ro.next_value, cfg.gamma, cfg.gae_lambda
            )
            if cfg.norm_adv and cfg.norm_adv_scope == "rollout":
                advantages = normalize_advantages(advantages)
        T, N = ro.rewards.shape
        teacher_coef = self.teacher_coef()
        sums: dict[str, torch.Tensor] = {}
        count = 0
        for _ in range(cfg.update_epochs):
            for mb in self._minibatches(ro, advantages, returns, T, N):
                stats = self._step(mb)
                for k, v in stats.items():
                    sums[k] = sums.get(k, 0) + v
                count += 1
            if cfg.target_kl is not None and float(stats["losses/approx_kl"]) > cfg.target_kl:
                break
        self.updates += 1
        out = {k: float(v) / count for k, v in sums.items()}
        var_ret = returns.var()
        out["losses/explained_variance"] = (
            float(1 - (returns - ro.values).var() / var_ret) if var_ret > 0 else math.nan
        )
        out["charts/learning_rate"] = self.optimizer.param_groups[0]["lr"]
        if self.cfg.teacher is not None:
            out["charts/teacher_coef"] = teacher_coef
        return out

    # -- minibatching -----------------------------------------------------------------------
    def _minibatches(self, ro: Rollout, adv: torch.Tensor, ret: torch.Tensor, T: int, N: int):
        dev = ro.rewards.device
        # the teacher's labels only when kickstarting (an allocated rollout always has the tensor)
        teacher = ro.teacher_actions if self.cfg.teacher is not None else None
        if self.recurrent:  # groups of whole env sequences, replayed from the stored state
            firsts = ro.dones if self.cfg.replay_reset == "done" else ro.firsts
            per = max(1, N // self.cfg.num_minibatches)
            perm = torch.randperm(N, device=dev)
            for start in range(0, N - per + 1, per):
                idx = perm[start : start + per]
                yield Batch(
                    obs=ro.obs[:, idx],
                    firsts=firsts[:, idx],
                    prev_rewards=ro.prev_rewards[:, idx],
                    actions=ro.actions[:, idx],
                    logprobs=ro.logprobs[:, idx],
                    values=ro.values[:, idx],
                    advantages=adv[:, idx],
                    returns=ret[:, idx],
                    initial_state={k: v[idx] for k, v in ro.initial_state.items()},
                    teacher_actions=None if teacher is None else teacher[:, idx],
                )
        else:  # shuffled individual samples
            B = T * N
            per = max(1, B // self.cfg.num_minibatches)
            perm = torch.randperm(B, device=dev)
            flat = lambda x: x.reshape(B, *x.shape[2:])  # noqa: E731
            obs = flat(ro.obs)
            for start in range(0, B - per + 1, per):
                idx = perm[start : start + per]
                yield Batch(
                    obs=obs[idx],
                    firsts=flat(ro.firsts)[idx],
                    prev_rewards=flat(ro.prev_rewards)[idx],
                    actions=flat(ro.actions)[idx],
                    logprobs=flat(ro.logprobs)[idx],
                    values=flat(ro.values)[idx],
                    advantages=flat(adv)[idx],
                    returns=flat(ret)[idx],
                    teacher_actions=None if teacher is None else flat(teacher)[idx],
                )

    def _chunks(self, mb: Batch, samples: int | None = None):
        """Split a minibatch into pieces of at most ``samples`` (default ``chunk_size``; 0 = whole)
        samples, each with its share of ``mb``."""
        samples = self.cfg.chunk_size if samples is None else samples
        axis = 1 if self.recurrent else 0
        n = mb.actions.shape[axis]
        samples_per_item = mb.actions.shape[0] if self.recurrent else 1
        size = n if samples <= 0 else max(1, samples // samples_per_item)
        for start in range(0, n, size):
            sl = slice(start, start + size)
            index = (slice(None), sl) if self.recurrent else sl

            def pick(x, index=index):
                return x[index]

            yield (
                Batch(
                    obs=pick(mb.obs),
                    firsts=pick(mb.firsts),
                    prev_rewards=pick(mb.prev_rewards),
                    actions=pick(mb.actions),
                    logprobs=pick(mb.logprobs),
                    values=pick(mb.values),
                    advantages=pick(mb.advantages),
                    returns=pick(mb.returns),
                    initial_state=None
                    if mb.initial_state is None
                    else {k: v[sl] for k, v in mb.initial_state.items()},
                    teacher_actions=None if mb.teacher_actions is None else pick(mb.teacher_actions),
                ),
                min(size, n - start) / n,
            )

    # -- one optimiser step -----------------------------------------------------------------
    def _forward(self, mb: Batch):
        with self.rt.autocast():
            if self.recurrent:
                out, _ = self.agent.unroll(mb.obs, mb.initial_state, mb.firsts, mb.prev_rewards)
            else:
                state = self.agent.initial_state(mb.obs.shape[0], device=mb.obs.device)
                out, _ = self.agent.step(mb.obs, state, mb.firsts, mb.prev_rewards)
        return out.logits, out.value

    def _pieces(self, mb: Batch):
        """``(piece, gradient weight, statistics weight)`` for each forward/backward pass of ``mb``.

        ``chunk_size`` chunks are weighted by their share (or 1 with ``sum_chunk_grads``); the
        runtime's ``compute_chunk`` splits feed-forward chunks further, for speed only (sequence
        replay needs whole sequences), each piece weighted by its share of the chunk, so that the
        gradient is the chunk's.
        """
        compute_chunk = 0 if self.recurrent else self.rt.compute_chunk
        for chunk, share in self._chunks(mb):
            weight = 1.0 if self.cfg.sum_chunk_grads else share
            for piece, part in self._chunks(chunk, compute_chunk):
                yield piece, weight * part, share * part

    def _piece_loss(self, piece: Batch):
        logits, values = self._forward(piece)
        return ppo_loss(logits, values, piece, self.cfg, self.teacher_coef())

    def _piece_gradients(self, task: tuple[Batch, float, float]):
        """One piece's weighted gradients and statistics, computed in whichever thread runs it."""
        piece, weight, _ = task
        loss, stats = self._piece_loss(piece)
        return torch.autograd.grad(loss * weight, self.params, allow_unused=True), stats

    def gradients(self, mb: Batch) -> dict[str, torch.Tensor]:
        """Add the minibatch's gradient to ``.grad``, computed in the runtime's layout; its statistics."""
        stats: dict[str, torch.Tensor] = {}
        tasks = list(self._pieces(mb))
        if self.rt.workers > 1 and len(tasks) > 1:  # side by side; summed in piece order, as below
            results = self.rt.map(self._piece_gradients, tasks, self.rt.workers)
            for (_, _, share), (grads, piece_stats) in zip(tasks, results, strict=True):
                accumulate_gradients(self.params, grads)
                add_weighted(stats, piece_stats, share)
        else:
            for piece, weight, share in tasks:
                loss, piece_stats = self._piece_loss(piece)
                (loss * weight).backward()
                add_weighted(stats, piece_stats, share)
        return stats

    def _step(self, mb: Batch) -> dict[str, torch.Tensor]:
        cfg = self.cfg
        if cfg.norm_adv and cfg.norm_adv_scope == "minibatch":
            mb.advantages = normalize_advantages(mb.advantages)
        self.optimizer.zero_grad(set_to_none=True)
        stats = self.gradients(mb)
        average_gradients(self.agent.parameters())
        stats["losses/grad_norm"] = torch.nn.utils.clip_grad_norm_(self.agent.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        return stats

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
