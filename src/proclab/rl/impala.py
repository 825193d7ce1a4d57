"""IMPALA's learner (Espeholt et al. 2018) with the modern-srwm seed's settings.

Read top to bottom: :class:`Unrolls` is what actors send (the same layout whether they are
local processes or Ray actors); :func:`impala_loss` is the objective on one batch of them;
:class:`ImpalaLearner` runs one optimiser step per batch. Every detail is a field of
:class:`~proclab.rl.config.ImpalaConfig` and listed in docs/impala.md:

1. The learner unrolls the agent over all ``T+1`` observations of each unroll, from the agent
   state the actor recorded at its start (carried over from the actor's previous unroll, so
   produced by older weights), and bootstraps from the value of the last observation.
2. Rewards are clipped to [-1, 1] (``abs_one``); gamma is 0 after an episode's last step.
3. V-trace targets and advantages (:mod:`proclab.rl.vtrace`) correct for the policy lag.
4. Losses are **sums** over the ``T x B`` entries, as in the seed (``reduction="mean"`` divides
   by ``T x B``): policy gradient ``-sum log pi(a|x) A``, value ``0.5 * 0.5 * sum (v - V)^2``
   (baseline cost 0.5), entropy ``0.01 * sum pi log pi``.
5. RMSprop (lr 6e-4, alpha 0.99, eps 0.01), global grad-norm clip 40, learning rate decayed
   linearly to 0 at ``total_steps``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from proclab.rl.config import ImpalaConfig
from proclab.rl.vtrace import vtrace
from proclab.run.runtime import Runtime


@dataclass
class Unrolls:
    """``B`` env unrolls, time-major: ``T+1`` observations and the ``T`` transitions between them.

    Row ``t`` follows proclab's timestep convention: ``obs[t]``, whether it starts an episode,
    the raw reward that arrived with it, then the action taken, its log-probability under the
    acting (behaviour) policy, the raw reward it earned and whether the episode ended after it.
    ``obs[T]`` has no action: it is row 0 of the actor's next unroll.
    """

    obs: torch.Tensor  # (T+1, B, 3, 64, 64) uint8
    firsts: torch.Tensor  # (T+1, B) bool
    prev_rewards: torch.Tensor  # (T+1, B)
    actions: torch.Tensor  # (T, B) int64
    logprobs: torch.Tensor  # (T, B) log mu(a_t | obs_t)
    rewards: torch.Tensor  # (T, B)
    dones: torch.Tensor  # (T, B) bool
    initial_state: dict[str, torch.Tensor]  # agent state entering obs[0], batch-first (B, ...)
    versions: torch.Tensor  # (B,) int64: learner updates behind the weights that acted

    @classmethod
    def zeros(cls, T: int, B: int, state_shapes: dict[str, tuple[int, ...]], lead: tuple[int, ...] = ()):
        """Zero-filled storage; ``lead`` adds leading dims (e.g. the slots of a shared buffer)."""

        def z(*shape, dtype=torch.float32):
            return torch.zeros(*lead, *shape, dtype=dtype)

        return cls(
            obs=z(T + 1, B, 3, 64, 64, dtype=torch.uint8),
            firsts=z(T + 1, B, dtype=torch.bool),
            prev_rewards=z(T + 1, B),
            actions=z(T, B, dtype=torch.int64),
            logprobs=z(T, B),
            rewards=z(T, B),
            dones=z(T, B, dtype=torch.bool),
            initial_state={k: z(B, *s) for k, s in state_shapes.items()},
            versions=z(B, dtype=torch.int64),
        )

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Unrolls:
        """The same unrolls with ``fn`` applied to every tensor (index a slot, move to a device...)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out = {k: fn(v) for k, v in fields.items() if k != "initial_state"}
        return Unrolls(**out, initial_state={k: fn(v) for k, v in self.initial_state.items()})

    @staticmethod
    def cat(parts: list[Unrolls]) -> Unrolls:
        """Concatenate along the batch dimension (dim 1 for time-major fields, 0 otherwise)."""
        first = parts[0]
        out = {}
        for f in dataclasses.fields(first):
            if f.name == "initial_state":
                continue
            dim = 0 if f.name == "versions" else 1
            out[f.name] = torch.cat([getattr(p, f.name) for p in parts], dim=dim)
        state = {k: torch.cat([p.initial_state[k] for p in parts]) for k in first.initial_state}
        return Unrolls(**out, initial_state=state)

    @property
    def unroll_length(self) -> int:
        return self.actions.shape[0]

    @property
    def batch_size(self) -> int:
        return self.actions.shape[1]


def clip_rewards(rewards: torch.Tensor, how: str) -> torch.Tensor:
    """``abs_one``: clamp to [-1, 1] (a clamp, not a sign); ``none``: unchanged."""
    return rewards.clamp(-1, 1) if how == "abs_one" else rewards


def impala_loss(logits: torch.Tensor, values: torch.Tensor, batch: Unrolls, cfg: ImpalaConfig):
    """Total loss and its parts; ``logits`` ``(T+1, B, A)`` and ``values`` ``(T+1, B)`` come from the
    learner's unroll over ``batch.obs``. Row ``T`` only supplies the bootstrap value ``V(x_T)``."""
    logp_all = torch.log_softmax(logits[:-1].float(), dim=-1)
    target_logprobs = logp_all.gather(-1, batch.actions.unsqueeze(-1)).squeeze(-1)
    values = values.float()
    discounts = cfg.gamma * (~batch.dones).float()
    vt = vtrace(
        batch.logprobs,
        target_logprobs,
        clip_rewards(batch.rewards, cfg.reward_clipping),
        discounts,
        values[:-1],
        values[-1],
        rho_bar=cfg.rho_bar,
        c_bar=cfg.c_bar,
        pg_rho_bar=cfg.pg_rho_bar,
    )
    reduce = torch.sum if cfg.reduction == "sum" else torch.mean
    pg_loss = reduce(-target_logprobs * vt.pg_advantages)
    baseline_loss = 0.5 * reduce((vt.vs - values[:-1]) ** 2)
    neg_entropy = (logp_all.exp() * logp_all).sum(-1)
    entropy_loss = reduce(neg_entropy)
    loss = pg_loss + cfg.baseline_cost * baseline_loss + cfg.entropy_cost * entropy_loss
    with torch.no_grad():
        stats = {
            "losses/total_loss": loss.detach(),
            "losses/policy_loss": pg_loss.detach(),
            "losses/value_loss": baseline_loss.detach(),
            "losses/entropy_loss": entropy_loss.detach(),
            "losses/entropy": -neg_entropy.mean(),
            "losses/mean_rho": vt.rhos.mean(),
            "losses/clipped_rho_fraction": (vt.rhos > cfg.rho_bar).float().mean(),
        }
    return loss, stats


class ImpalaLearner:
    """Owns the optimiser and the learning-rate schedule; :meth:`update` trains on one batch."""

    def __init__(self, agent: torch.nn.Module, cfg: ImpalaConfig, runtime: Runtime):
        self.agent, self.cfg, self.rt = agent, cfg, runtime
        self.optimizer = torch.optim.RMSprop(
            agent.parameters(),
            lr=cfg.learning_rate,
            alpha=cfg.rms_alpha,
            eps=cfg.rms_eps,
            momentum=cfg.rms_momentum,
        )
        self.steps_per_update = cfg.batch_size * cfg.unroll_length
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.updates = 0

    def _lr_factor(self, updates: int) -> float:
        """The seed's schedule: 1 - min(n * T * B, total) / total after n updates."""
        if not self.cfg.anneal_lr:
            return 1.0
        total = self.cfg.total_steps
        return 1.0 - min(updates * self.steps_per_update, total) / total

    def update(self, batch: Unrolls) -> dict[str, float]:
        with self.rt.autocast():
            out, _ = self.agent.unroll(batch.obs, batch.initial_state, batch.firsts, batch.prev_rewards)
        loss, stats = impala_loss(out.logits, out.value, batch, self.cfg)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        stats["losses/grad_norm"] = torch.nn.utils.clip_grad_norm_(
            self.agent.parameters(), self.cfg.max_grad_norm
        )
        lag = (self.updates - batch.versions).float()
        stats["charts/policy_lag"], stats["charts/policy_lag_max"] = lag.mean(), lag.max()
        stats["charts/learning_rate"] = torch.tensor(self.optimizer.param_groups[0]["lr"])
        self.optimizer.step()
        self.scheduler.step()
        self.updates += 1
        return {k: float(v) for k, v in stats.items()}

    def state_dict(self) -> dict:
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.updates = int(state["updates"])
        for group, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs, strict=True):
            group["lr"] = base * self._lr_factor(self.updates)  # follows a changed --total-steps
