"""IMPALA's actors as Ray actors, for runs across machines (``--ray-address``).

The same :class:`~proclab.rl.actors.ActorWorker` (envs, CPU agent, acting loop, seeds, games
per env) runs inside a Ray actor; only the transport changes. Instead of shared-memory slots,
each call ``unroll(weights, version)`` returns one :class:`~proclab.rl.impala.Unrolls` through
Ray's object store, and the weights travel the same way: the learner ``ray.put``\\ s them once
per update and passes the reference with every call, so each node fetches a version once.
Two calls are kept queued per training actor, so an actor starts its next unroll while the
learner trains. The learner (this process) can sit on a GPU node of the cluster.

A Ray actor that dies (its node is lost, ``ray.kill``, an exception) is replaced by a new one
with fresh env seeds and counted in ``charts/actor_restarts``, as for local processes.
Install with ``pip install 'proclab[distributed]'``; every node needs proclab installed.
"""

from __future__ import annotations

import sys
from collections import deque

import torch

from proclab.rl.actors import STALL_SECONDS, ActorSpec, ActorWorker, actor_seed, actor_specs, flatten_weights
from proclab.rl.config import TrainConfig
from proclab.rl.impala import Unrolls
from proclab.run.distributed import connect_ray

CALLS_IN_FLIGHT = 2  # queued unroll calls per training actor


class RayActorWorker(ActorWorker):
    """An :class:`ActorWorker` that returns each unroll instead of writing it to shared memory."""

    def __init__(self, config: TrainConfig, spec: ActorSpec, seed: int):
        super().__init__(config, spec, seed)
        self.buffer = Unrolls.zeros(self.T, spec.num_envs, self.agent.state_shapes())

    def unroll(self, weights: torch.Tensor, version: int):
        self.set_weights(weights, version)
        episodes = self.fill(self.buffer)
        return self.buffer, episodes  # serialised by Ray on return, so the buffer can be reused


class RayActorPool:
    """Ray actors on a cluster; the same interface as :class:`~proclab.rl.actors.ActorPool`."""

    def __init__(self, config: TrainConfig, agent: torch.nn.Module, start_step: int = 0):
        self.config, self.start_step = config, start_step
        self.specs = actor_specs(config)
        self.batch_parts = config.impala.batch_size // self.specs[0].num_envs
        self.handles: dict[int, object] = {}
        self.pending: dict[object, ActorSpec] = {}  # ObjectRef of an unroll call -> its actor
        self.ready: deque[Unrolls] = deque()
        self.held: list[ActorSpec] = []  # validation actors, called again after the next batch
        self.weights: torch.Tensor | None = None
        self.weights_ref = None
        self.version = 0
        self.restarts = 0
        self._restarts_since_batch = 0

    # -- lifetime ------------------------------------------------------------------------------
    def __enter__(self) -> RayActorPool:
        self.ray = connect_ray(
            self.config.impala.ray_address, local_cpus=len(self.specs)
        )  # one CPU per actor
        self.remote_worker = self.ray.remote(num_cpus=1)(RayActorWorker)
        for spec in self.specs:
            self._start(spec)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for handle in self.handles.values():
            self.ray.kill(handle)
        self.handles.clear()
        self.pending.clear()
        self.ray.shutdown()

    def _start(self, spec: ActorSpec) -> None:
        seed = actor_seed(self.config.seed, spec, self.start_step)
        self.handles[spec.id] = self.remote_worker.remote(self.config, spec, seed)
        for _ in range(1 if spec.validation else CALLS_IN_FLIGHT):
            self._call(spec)

    def _call(self, spec: ActorSpec) -> None:
        if self.weights_ref is None:
            self.weights_ref = self.ray.put(self.weights)
        ref = self.handles[spec.id].unroll.remote(self.weights_ref, self.version)
        self.pending[ref] = spec

    # -- weights and unrolls -------------------------------------------------------------------
    def publish(self, agent: torch.nn.Module, version: int) -> None:
        self.weights, self.weights_ref, self.version = flatten_weights(agent), None, version

    def next_batch(self, on_episodes) -> Unrolls:
        ray = self.ray
        while len(self.ready) < self.batch_parts:
            done, _ = ray.wait(list(self.pending), num_returns=1, timeout=STALL_SECONDS)
            if not done:
                raise RuntimeError(
                    f"no unroll from any of the {len(self.specs)} Ray actors for {STALL_SECONDS:.0f} s"
                )
            spec = self.pending.pop(done[0])
            try:
                unrolls, episodes = ray.get(done[0])
            except ray.exceptions.RayError as err:
                self._restart(spec, err)
                continue
            on_episodes(episodes, spec.validation)
            if spec.validation:
                self.held.append(spec)
            else:
                self.ready.append(unrolls)
                self._call(spec)
        batch = Unrolls.cat([self.ready.popleft() for _ in range(self.batch_parts)])
        for spec in self.held:
            self._call(spec)
        self.held.clear()
        self._restarts_since_batch = 0
        return batch

    def _restart(self, spec: ActorSpec, err: Exception) -> None:
        for ref, owner in list(self.pending.items()):  # its other queued calls fail too: forget them
            if owner is spec:
                del self.pending[ref]
        self.ray.kill(self.handles.pop(spec.id))
        self.restarts += 1
        self._restarts_since_batch += 1
        last = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        if self._restarts_since_batch > 2 * len(self.specs):
            raise RuntimeError(
                f"Ray actors keep dying ({self._restarts_since_batch} restarts without a batch): {err}"
            )
        print(
            f"proclab: Ray actor {spec.id} died ({last}); restarting it with fresh env seeds",
            file=sys.stderr,
            flush=True,
        )
        spec.generation += 1
        self._start(spec)
