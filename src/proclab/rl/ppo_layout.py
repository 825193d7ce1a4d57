"""The PPO learner's layout for this run: timed on its own agent and batch sizes, or cached, or given.

:func:`ppo_layout` is what a :class:`~proclab.rl.ppo_train.Trainer` calls before it builds its
actors and learner. On a CPU it times each candidate layout (:mod:`proclab.run.layout`) with the
code the run will use: the learner's :meth:`~proclab.rl.ppo.PPOLearner.gradients` on a minibatch
of the run's size, and the agent's acting pass on a batch of the run's envs, both on random frames
drawn from a private generator. The agent's weights, gradients and the global random streams are
left as they were, so a run whose layout was measured computes what a run given that layout does.
On a GPU the layout is whole batches on the device (nothing to time).
"""

from __future__ import annotations

import time

import torch

from proclab.envs.actions import NUM_ACTIONS
from proclab.io.configs import to_dict
from proclab.rl.config import TrainConfig
from proclab.rl.ppo import Batch, PPOLearner
from proclab.run.distributed import rank_and_world
from proclab.run.layout import CHOICES, Choice, Layout, LayoutCache, Timings, choose_layout, layout_key
from proclab.run.runtime import Runtime, cpu_name

PIECE_SIZES = (64, 128, 256)
"""Learner pieces timed besides the whole minibatch (32 and 512+ lost to these on every CPU tried)."""
ACTING_STEPS = 4
ROUNDS = 3
"""Acting schemes are timed in this many interleaved rounds, each keeping its best: one round of a few
milliseconds ranked intra-op threads and workers both ways a minute apart on one quiet CPU (0.20 vs
0.27 ms per sample, then 0.29 vs 0.21)."""
CLOSE = 1.25
"""Learner candidates within this factor of the fastest are timed once more, interleaved, each keeping
its best: on a quiet 2-core CPU every scheme and piece size lies within 15 % of the others."""
BUDGET_SECONDS = 5.0
"""The whole minibatch is timed only if the rest took less than this (about 1 s on an idle 2-core CPU)."""
CUTOFF = 3.0
"""A candidate whose untimed first round is this many times slower per sample than the best so far
is not timed further (it includes one-off costs, so it only decides clear losses)."""


def ppo_layout(cfg: TrainConfig, rt: Runtime, agent: torch.nn.Module, envs: int) -> Choice:
    """The layout of a PPO run with ``envs`` envs per process (``cfg.learner_layout`` decides how).
    Under torchrun, rank 0 chooses and the other ranks take its choice (all compute alike)."""
    rank, world = rank_and_world()
    shared = world > 1 and rt.device.type == "cpu"  # GPUs need no timing: every rank chooses alike
    if shared and rank > 0:
        return Choice(Layout.parse(_from_rank0(None)), "rank 0's choice")
    choice = _choose(cfg, rt, agent, envs)
    if shared:
        _from_rank0(str(choice.layout))
    return choice


def _from_rank0(spec: str | None) -> str:
    box = [spec]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def _choose(cfg: TrainConfig, rt: Runtime, agent: torch.nn.Module, envs: int) -> Choice:
    if rt.device.type != "cpu":
        spec = "whole:intra" if cfg.learner_layout in CHOICES else cfg.learner_layout
        return Choice(Layout.parse(spec), "whole batches on the GPU" if spec == "whole:intra" else "given")
    threads = torch.get_num_threads()
    minibatch = envs * cfg.ppo.num_steps // cfg.ppo.num_minibatches
    key = layout_key(
        cpu_name(),
        "bf16" if rt.bf16 else "fp32",
        threads,
        torch.__version__,
        to_dict(cfg.agent),
        minibatch=minibatch,
        envs=envs,
        chunk_size=cfg.ppo.chunk_size,
    )
    return choose_layout(cfg.learner_layout, key, lambda: _measure_run(cfg, rt, agent, envs), LayoutCache())


def retime_layout(cfg: TrainConfig, rt: Runtime, agent: torch.nn.Module, envs: int) -> Choice:
    """The fastest layout now, timed as at the start of a run, for a run whose load has changed
    (:class:`~proclab.run.layout.PaceWatch`). The cache is left alone: it holds the choice a run
    starts with, and a load that came and went says nothing about the next run."""
    start = time.perf_counter()
    timings = _measure_run(cfg, rt, agent, envs)
    return Choice(timings.fastest(), f"timed again in {time.perf_counter() - start:.1f} s", timings)


def _measure_run(cfg: TrainConfig, rt: Runtime, agent: torch.nn.Module, envs: int) -> Timings:
    threads = torch.get_num_threads()
    minibatch = envs * cfg.ppo.num_steps // cfg.ppo.num_minibatches
    recurrent = bool(agent.initial_state(1))
    return measure_layouts(cfg, rt, agent, minibatch, envs, threads, recurrent)


def learner_candidates(minibatch: int, threads: int, recurrent: bool) -> list[tuple[int, str]]:
    """``(piece, scheme)`` pairs worth timing, cheapest first: pieces smaller than the minibatch on
    workers (with two or more threads and a piece for each in the timed share; the safe choice on a
    loaded machine, timed first so that it sets the bar) or on intra-op threads, then the whole
    minibatch. Agents with memory replay whole sequences, so they have only
    the whole minibatch."""
    if recurrent:
        return [(0, "intra")]
    share = _share(minibatch, threads)
    out = []
    for piece in (p for p in PIECE_SIZES if p < minibatch):
        if threads > 1 and share // piece >= threads:
            out.append((piece, "workers"))
        out.append((piece, "intra"))
    return [*out, (0, "intra")]


def _share(minibatch: int, threads: int) -> int:
    """Samples on which pieces are timed: two of the largest pieces per core, at most the minibatch.
    With one piece per worker (the earlier share of 128 per core), a worker's wake-up weighed on every
    timing: 128 samples on workers timed at 0.64 ms per sample where 1,024 ran at 0.50."""
    return min(minibatch, 2 * threads * max(PIECE_SIZES))


def measure_layouts(
    cfg: TrainConfig,
    rt: Runtime,
    agent: torch.nn.Module,
    minibatch: int,
    envs: int,
    threads: int,
    recurrent: bool,
    budget: float = BUDGET_SECONDS,
) -> Timings:
    """Seconds per sample of each candidate: acting on a batch of ``envs``, the learner's pieces on
    equal shares of a random minibatch and the whole one on a full minibatch. The whole minibatch,
    the costliest to time, is left out when ``budget`` seconds have passed before it (a machine
    shared with many jobs, where pieces win anyway). Close contenders are timed again (:data:`ROUNDS`,
    :data:`CLOSE`), as a single round of a few milliseconds ranks them by chance."""
    start = time.perf_counter()
    gen = torch.Generator().manual_seed(0)
    obs = _random_obs(envs, rt.device, gen)
    acting: dict[str, float] = {}
    for _ in range(ROUNDS):
        for scheme in ("intra", "workers") if threads > 1 and envs >= threads else ("intra",):
            seconds = _acting_seconds(agent, Layout(acting=scheme).apply(rt, threads), obs)
            acting[scheme] = min(seconds, acting.get(scheme, seconds))
    learner: dict[tuple[int, str], float] = {}
    if recurrent:
        learner[0, "intra"] = 0.0  # one candidate: nothing to compare
        return Timings(learner, acting)
    full = _random_batch(minibatch, rt.device, gen)
    part = _subset(full, _share(minibatch, threads))
    for piece, scheme in learner_candidates(minibatch, threads, recurrent):
        if piece == 0 and learner and time.perf_counter() - start > budget:
            break
        layout_rt = Layout(piece, scheme).apply(rt, threads)
        cutoff = CUTOFF * min(learner.values(), default=float("inf"))
        learner[piece, scheme] = _learner_seconds(agent, cfg, layout_rt, full if piece == 0 else part, cutoff)
    fastest = min(learner.values())
    for (piece, scheme), seconds in list(learner.items()):
        if len(learner) > 1 and seconds <= CLOSE * fastest:  # a second, interleaved round for contenders
            again = _learner_seconds(
                agent, cfg, Layout(piece, scheme).apply(rt, threads), full if piece == 0 else part
            )
            learner[piece, scheme] = min(seconds, again)
    return Timings(learner, acting)


def _learner_seconds(
    agent: torch.nn.Module, cfg: TrainConfig, rt: Runtime, mb: Batch, cutoff: float = float("inf")
) -> float:
    """Wall seconds per sample of the learner's gradient computation on ``mb`` in ``rt``'s layout,
    after an untimed round of pieces (their shapes, the workers' first passes), leaving no gradient
    behind. A layout whose first round already took over ``cutoff`` seconds per sample has lost:
    that round's time is returned without timing ``mb`` (on a loaded machine, saves seconds)."""
    learner = PPOLearner(agent, cfg.ppo, rt, total_updates=1)
    n = mb.actions.shape[0]
    first = _subset(mb, rt.compute_chunk * max(1, rt.workers) or PIECE_SIZES[0])
    try:
        start = time.perf_counter()
        learner.gradients(first)
        seconds = (time.perf_counter() - start) / first.actions.shape[0]
        if seconds > cutoff:
            return seconds
        start = time.perf_counter()
        learner.gradients(mb)
        return (time.perf_counter() - start) / n
    finally:
        agent.zero_grad(set_to_none=True)


def _acting_seconds(agent: torch.nn.Module, rt: Runtime, obs: torch.Tensor) -> float:
    """Wall seconds per sample of the acting forward pass on ``obs``, whole or in slices on workers."""
    n = obs.shape[0]
    slices = list(torch.arange(n).tensor_split(max(1, rt.acting_workers)))

    def rows(index: torch.Tensor):
        with torch.inference_mode(), rt.autocast():
            m = len(index)
            state = agent.initial_state(m, device=rt.device)
            first = torch.zeros(m, dtype=torch.bool, device=rt.device)
            return agent.step(obs[index], state, first, torch.zeros(m, device=rt.device))

    list(rt.map(rows, slices, rt.acting_workers))  # warm-up
    start = time.perf_counter()
    for _ in range(ACTING_STEPS):
        list(rt.map(rows, slices, rt.acting_workers))
    return (time.perf_counter() - start) / (ACTING_STEPS * n)


def _random_obs(n: int, device: torch.device, gen: torch.Generator) -> torch.Tensor:
    obs = torch.randint(0, 256, (n, 3, 64, 64), dtype=torch.uint8, generator=gen)
    return obs.contiguous(memory_format=torch.channels_last).to(device)


def _random_batch(n: int, device: torch.device, gen: torch.Generator) -> Batch:
    """A feed-forward minibatch of ``n`` random samples (the learner's work does not depend on the values)."""
    actions = torch.randint(0, NUM_ACTIONS, (n,), generator=gen)
    logprobs = torch.full((n,), -float(torch.log(torch.tensor(float(NUM_ACTIONS)))))
    return Batch(
        obs=_random_obs(n, device, gen),
        firsts=torch.zeros(n, dtype=torch.bool, device=device),
        prev_rewards=torch.zeros(n, device=device),
        actions=actions.to(device),
        logprobs=logprobs.to(device),
        values=torch.randn(n, generator=gen).to(device),
        advantages=torch.randn(n, generator=gen).to(device),
        returns=torch.randn(n, generator=gen).to(device),
    )


def _subset(mb: Batch, n: int) -> Batch:
    """The first ``n`` samples of a feed-forward minibatch."""
    return Batch(**{k: v[:n] for k, v in vars(mb).items() if v is not None})
