"""IMPALA's actors on one machine: processes that act and hand unrolls to the learner through shared memory.

What the modern-srwm seed did with torchbeast's C++ actor pool, gRPC env servers and batching
queues is here plain ``torch.multiprocessing``:

* **Actors.** Each actor process steps its own :class:`~proclab.envs.ProcgenVecEnv` with a CPU
  copy of the agent (:class:`ActorWorker`, one torch thread) and fills *unrolls*: ``T+1``
  observations, the ``T`` transitions between them, and the agent state entering the first
  (:class:`~proclab.rl.impala.Unrolls`). Its observation, first flags and agent state carry over
  from one unroll to the next (the acting loop is :class:`~proclab.rl.rollout.Actor`'s), so
  row ``T`` of one unroll is row 0 of the next, as in the seed.
* **Multi-task.** Env ``j`` of the run (actor ``j // E``, slot ``j % E``) plays game
  ``games[j mod G]``: the seed's layout (server ``i`` plays ``list_env[i % N]``), so every game
  gets ``num_envs / G`` envs however they are split over actors.
* **Unroll slots.** Unrolls are written into shared-memory slots allocated by the learner, a
  few per actor. Each actor has its own pipe: the learner sends it the index of a free slot,
  the actor answers with the index once the slot is full (and the episodes that finished in
  it). Pipes, not one shared queue: killing a process while it writes to a shared
  ``multiprocessing.Queue`` can corrupt that queue for everyone; a dead actor's pipe is simply
  dropped.
* **Weights.** The learner publishes its parameters after every update into one shared flat
  tensor with a version (its update count) under a sequence lock: the writer never waits for
  readers (a reader killed mid-copy cannot block it), and a reader retries if the copy it made
  overlapped a write. Actors pick up new weights at the start of each unroll and stamp the
  unroll with the version, so the learner measures the policy lag.
* **Crashes.** The learner checks the actors' exit codes while it waits; a dead actor is
  restarted with fresh env seeds, given back its slots, and counted (``charts/actor_restarts``).
  Actors that keep dying without a single batch reaching the learner stop the run with the last
  actor's error; no unroll for :data:`STALL_SECONDS` stops it too. No silent hang.

Processes are started by a ``forkserver``: forking the learner, which already runs procgen's
and torch's threads, is unsafe, while the fork server is a clean process that imports torch,
procgen and this module once, so actors (and restarts) start in milliseconds, not seconds. Ray actors (:mod:`proclab.rl.ray_actors`) reuse
:class:`ActorWorker` and the slot layout, with Ray as the transport.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import time
import traceback
from collections import deque
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait

import numpy as np
import torch
import torch.multiprocessing as mp

from proclab.envs import ProcgenVecEnv
from proclab.models import build_agent
from proclab.models.loading import freeze
from proclab.rl.config import TrainConfig
from proclab.rl.impala import Unrolls
from proclab.rl.rollout import Actor, Rollout
from proclab.run.runtime import make_runtime

STALL_SECONDS = 600.0
"""Stop the run if no actor delivers an unroll for this long while all of them are alive."""


# -- which envs and games each actor plays -----------------------------------------------------
@dataclass
class ActorSpec:
    """One actor's share of the run: envs ``first_env ..`` of ``games``, on ``split``."""

    id: int
    first_env: int
    num_envs: int
    split: str | None = None  # None: the training split
    validation: bool = False
    slots: list[int] = field(default_factory=list)
    generation: int = 0  # restarts so far


def slot_games(games: tuple[str, ...], first_env: int, num_envs: int) -> tuple[list[int], tuple[str, ...]]:
    """Global game index of each env slot (env ``j`` plays ``games[j mod G]``), and the game tuple to
    build the actor's vector env with (its slot ``i`` plays entry ``i mod len``)."""
    index = [(first_env + i) % len(games) for i in range(num_envs)]
    return index, tuple(games[g] for g in index[: len(games)])


def actor_specs(config: TrainConfig) -> list[ActorSpec]:
    """The training actors, then the validation actor (if validation is on)."""
    cfg = config.impala
    per = config.env.num_envs // cfg.num_actors
    specs = [ActorSpec(i, i * per, per) for i in range(cfg.num_actors)]
    if config.val_split is not None and config.val_num_envs > 0:
        specs.append(ActorSpec(cfg.num_actors, 0, config.val_num_envs, config.val_split, validation=True))
    return specs


def actor_seed(run_seed: int, spec: ActorSpec, start_step: int) -> int:
    """Env and sampling seed of one actor incarnation: fresh after a restart or a resume."""
    return int(np.random.SeedSequence([run_seed, spec.id, spec.generation, start_step]).generate_state(1)[0])


# -- weights ---------------------------------------------------------------------------------
def flatten_weights(module: torch.nn.Module) -> torch.Tensor:
    """Every parameter and buffer, in ``state_dict`` order, as one float32 CPU vector."""
    return torch.cat([t.detach().reshape(-1).float() for t in module.state_dict().values()]).cpu()


@torch.no_grad()
def load_flat_weights(module: torch.nn.Module, flat: torch.Tensor) -> None:
    """Inverse of :func:`flatten_weights` (into a module of the same architecture)."""
    offset = 0
    for t in module.state_dict().values():
        t.copy_(flat[offset : offset + t.numel()].view(t.shape))
        offset += t.numel()


class SharedWeights:
    """The learner's weights in shared memory with a version; see the module docstring."""

    def __init__(self, module: torch.nn.Module):
        self.flat = flatten_weights(module).share_memory_()
        self.counters = torch.zeros(2, dtype=torch.int64).share_memory_()  # [sequence, version]

    def publish(self, module: torch.nn.Module, version: int) -> None:
        self.counters[0] += 1  # odd: a write is under way
        self.flat.copy_(flatten_weights(module))
        self.counters[1] = version
        self.counters[0] += 1

    def version(self) -> int:
        return int(self.counters[1])

    def read_into(self, module: torch.nn.Module) -> int:
        """Copy the latest weights into ``module``; returns their version."""
        while True:
            before = int(self.counters[0])
            if before % 2 == 0:
                version = int(self.counters[1])
                local = self.flat.clone()
                if int(self.counters[0]) == before:
                    load_flat_weights(module, local)
                    return version
            time.sleep(0.001)


# -- the acting side -------------------------------------------------------------------------
class ActorWorker:
    """One actor's envs, its CPU copy of the agent and the :class:`~proclab.rl.rollout.Actor` loop."""

    def __init__(self, config: TrainConfig, spec: ActorSpec, seed: int):
        rt = make_runtime("cpu", "fp32" if config.precision == "fp32" else "auto", 1, config.channels_last)
        torch.manual_seed(seed)
        games = config.env.games()
        self.game_index, env_games = slot_games(games, spec.first_env, spec.num_envs)
        env_config = replace(config.env, game=env_games, num_threads=0)  # step in this thread
        env = ProcgenVecEnv(
            env_config, seed=seed, num_envs=spec.num_envs, split=spec.split, reward_rule=config.reward_rule
        )
        self.agent = freeze(rt.prepare(build_agent(config.agent)))
        self.version = -1
        self.actor = Actor(env, self.agent, rt)
        self.T = config.impala.unroll_length
        self.values = torch.zeros(self.T, spec.num_envs)  # Actor.collect writes them; IMPALA ignores them

    def set_weights(self, flat: torch.Tensor, version: int) -> None:
        if version != self.version:
            load_flat_weights(self.agent, flat)
            self.version = version

    def fill(self, u: Unrolls) -> dict[str, np.ndarray]:
        """Act for one unroll into ``u`` (``T+1`` x ``num_envs`` storage); returns the episodes
        that finished in it: global game index, return, length, level_complete."""
        T = self.T
        rollout = Rollout(
            obs=u.obs[:T],
            firsts=u.firsts[:T],
            prev_rewards=u.prev_rewards[:T],
            actions=u.actions,
            logprobs=u.logprobs,
            values=self.values,
            rewards=u.rewards,
            dones=u.dones,
            initial_state={},
        )
        finished: list[dict[str, np.ndarray]] = []
        self.actor.collect(rollout, on_info=lambda info: finished.append(self._finished(info)))
        u.obs[T] = rollout.next_obs
        u.firsts[T] = rollout.next_first
        u.prev_rewards[T] = self.actor.prev_reward
        for k, v in rollout.initial_state.items():
            u.initial_state[k].copy_(v)
        u.versions.fill_(self.version)
        return {k: np.concatenate([f[k] for f in finished]) for k in finished[0]}

    def _finished(self, info: dict) -> dict[str, np.ndarray]:
        ep = info["episode"]
        done = ep["done"]
        return {
            "game": np.asarray(self.game_index)[done],
            "return": ep["return"][done],
            "length": ep["length"][done],
            "level_complete": ep["level_complete"][done],
        }


def _actor_process(conn: Connection, slots: Unrolls, weights: SharedWeights, config, spec, seed) -> None:
    """An actor process: wait for a free slot, fill it with the latest weights, report it; repeat."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the learner, which stops the actors
    try:
        worker = ActorWorker(config, spec, seed)
        while True:
            slot = conn.recv()
            if weights.version() != worker.version:
                worker.version = weights.read_into(worker.agent)
            episodes = worker.fill(slots.map(lambda x, s=slot: x[s]))
            conn.send(("unroll", slot, episodes))
    except (EOFError, ConnectionError):  # the learner has gone: stop quietly
        return
    except Exception:
        with contextlib.suppress(OSError):
            conn.send(("error", traceback.format_exc()))
        raise


# -- the learner's side ------------------------------------------------------------------------
class ActorPool:
    """Actor processes on this machine; :meth:`next_batch` returns the next learner batch."""

    def __init__(self, config: TrainConfig, agent: torch.nn.Module, start_step: int = 0):
        cfg = config.impala
        self.config, self.start_step = config, start_step
        self.specs = actor_specs(config)
        per = self.specs[0].num_envs
        self.batch_slots = cfg.batch_size // per
        slots_per_actor = max(2, math.ceil(self.batch_slots / cfg.num_actors) + 1)
        shapes = agent.state_shapes()
        self.train_slots = Unrolls.zeros(
            cfg.unroll_length, per, shapes, lead=(slots_per_actor * cfg.num_actors,)
        )
        self.train_slots = self.train_slots.map(lambda x: x.share_memory_())
        self.buffers: dict[int, Unrolls] = {}
        self.owner: dict[int, ActorSpec] = {}  # training slot -> its actor
        for spec in self.specs:
            if spec.validation:
                one = Unrolls.zeros(cfg.unroll_length, spec.num_envs, shapes, lead=(1,))
                self.buffers[spec.id] = one.map(lambda x: x.share_memory_())
                spec.slots = [0]
            else:
                self.buffers[spec.id] = self.train_slots
                spec.slots = list(range(spec.id * slots_per_actor, (spec.id + 1) * slots_per_actor))
                self.owner.update(dict.fromkeys(spec.slots, spec))
        self.weights = SharedWeights(agent)
        self.ctx = mp.get_context("forkserver")
        self.ctx.set_forkserver_preload([__name__])
        self.procs: dict[int, mp.Process] = {}
        self.conns: dict[int, Connection] = {}
        self.errors: dict[int, str] = {}
        self.ready: deque[int] = deque()  # full training slots, oldest first
        self.held: list[tuple[ActorSpec, int]] = []  # validation slots, given back after the next batch
        self.restarts = 0
        self._restarts_since_batch = 0
        self._last_unroll = time.monotonic()

    # -- lifetime ------------------------------------------------------------------------------
    def __enter__(self) -> ActorPool:
        for spec in self.specs:
            self._spawn(spec)
        self._last_unroll = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()  # actors waiting for a slot see EOF and exit
        for proc in self.procs.values():
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        self.procs.clear()
        self.conns.clear()

    def _spawn(self, spec: ActorSpec) -> None:
        ours, theirs = self.ctx.Pipe()
        seed = actor_seed(self.config.seed, spec, self.start_step)
        proc = self.ctx.Process(
            target=_actor_process,
            args=(theirs, self.buffers[spec.id], self.weights, self.config, spec, seed),
            name=f"proclab-actor-{spec.id}",
            daemon=True,
        )
        proc.start()
        theirs.close()
        self.procs[spec.id], self.conns[spec.id] = proc, ours
        held = set(self.ready) if not spec.validation else {s for sp, s in self.held if sp is spec}
        for slot in spec.slots:
            if slot not in held:
                ours.send(slot)

    # -- weights and unrolls -------------------------------------------------------------------
    def publish(self, agent: torch.nn.Module, version: int) -> None:
        self.weights.publish(agent, version)

    def next_batch(self, on_episodes) -> Unrolls:
        """Wait for ``batch_size`` env unrolls; ``on_episodes(episodes, validation)`` gets the
        episodes finished in every unroll received meanwhile."""
        self._check_actors()
        while len(self.ready) < self.batch_slots:
            self._poll(on_episodes)
        slots = [self.ready.popleft() for _ in range(self.batch_slots)]
        batch = Unrolls.cat([self.train_slots.map(lambda x, s=s: x[s]) for s in slots])  # a copy
        for slot in slots:
            self._give_back(self.owner[slot], slot)
        for spec, slot in self.held:
            self._give_back(spec, slot)
        self.held.clear()
        self._restarts_since_batch = 0
        return batch

    def _give_back(self, spec: ActorSpec, slot: int) -> None:
        with contextlib.suppress(OSError):  # the actor died; its restart hands the slot to its successor
            self.conns[spec.id].send(slot)

    def _poll(self, on_episodes, timeout: float = 0.5) -> None:
        by_conn = {conn: sid for sid, conn in self.conns.items()}
        for conn in wait(list(by_conn), timeout):
            spec = self.specs[by_conn[conn]]
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                continue  # died mid-message; the exit code check below restarts it
            if msg[0] == "error":
                self.errors[spec.id] = msg[1]
                continue
            _, slot, episodes = msg
            self._last_unroll = time.monotonic()
            on_episodes(episodes, spec.validation)
            if spec.validation:
                self.held.append((spec, slot))
            else:
                self.ready.append(slot)
        self._check_actors()

    def _check_actors(self) -> None:
        for spec in self.specs:
            proc = self.procs[spec.id]
            if proc.exitcode is None:
                continue
            proc.join()
            self.conns.pop(spec.id).close()
            self.restarts += 1
            self._restarts_since_batch += 1
            error = self.errors.pop(spec.id, "")
            if self._restarts_since_batch > 2 * len(self.specs):
                raise RuntimeError(
                    f"IMPALA actors keep dying ({self._restarts_since_batch} restarts without a batch); "
                    f"actor {spec.id} exited with code {proc.exitcode}" + (f":\n{error}" if error else "")
                )
            last = error.strip().splitlines()[-1] if error.strip() else ""
            print(
                f"proclab: actor {spec.id} died (exit code {proc.exitcode}{'; ' + last if last else ''}); "
                "restarting it with fresh env seeds",
                file=sys.stderr,
                flush=True,
            )
            spec.generation += 1
            self._spawn(spec)
        if time.monotonic() - self._last_unroll > STALL_SECONDS:
            raise RuntimeError(
                f"no unroll from any of the {len(self.specs)} IMPALA actors for {STALL_SECONDS:.0f} s"
            )
