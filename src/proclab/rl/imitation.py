"""Imitation of a planner: DAgger (Ross et al. 2011) with the agent's and the goal's cells as auxiliary targets.

Why it exists: on two cores PPO does not teach a small agent the maze, with or without a planner's
kickstarting (docs/ppo.md): the torso never finds the mouse, a few pixels on a 15 x 15 grid, and the policy
stays at the moves' marginal. Supervised, with the cells of the agent and of the goal as auxiliary targets
read from the game state, the torso locates both within a few hundred updates and the policy then learns the
planner's moves (docs/benchmarks.md has the numbers). The cells are the planner's own view of the level
(:meth:`~proclab.models.planners.StatePolicy.cells`); their heads are discarded, and a checkpoint holds the
agent alone, which ``proclab.load`` reads like any run's.

Round 0 plays the teacher, a share ``explore`` of its steps replaced by a random action (states off its
path, labelled with its way back); every later round plays the student (sampled actions) and the teacher
labels each state the student reaches (DAgger with beta = 0): the states a student's own mistakes lead to are
the ones a teacher-only dataset lacks. After each round the student trains ``epochs`` passes over every frame
gathered so far. A round's frames and its checkpoint are written before the next round starts, so a stopped
run resumes at the round after its last checkpoint (:func:`imitate` with ``run_dir``).

Feed-forward agents only (``core="none"``): a frame and its label are a sample; a recurrent core would need
the sequences.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from proclab.envs.actions import NUM_ACTIONS
from proclab.envs.vec_env import EnvConfig, ProcgenVecEnv
from proclab.errors import ProclabError
from proclab.io.checkpoint import find_checkpoint, load_checkpoint, load_weights_into, save_checkpoint
from proclab.io.configs import from_dict, to_dict
from proclab.io.files import replacing
from proclab.io.progress import progress_bar
from proclab.io.run_dirs import (
    MetricsLogger,
    create_run_dir,
    game_label,
    read_run_config,
    record_config_change,
)
from proclab.models.agent import Agent, build_agent
from proclab.models.config import AgentConfig
from proclab.models.planners import StatePolicy, planner
from proclab.run.runtime import Runtime, RuntimeConfig, restore_rng_state, rng_state

CELLS = 64
"""Rows and columns each position head can name (procgen's grids are smaller)."""
ALGO = "imitation"


@dataclass(frozen=True, kw_only=True)
class ImitationConfig(RuntimeConfig):
    """An imitation run: the levels, the student's architecture, the teacher and the rounds (module docstring)."""

    env: EnvConfig = field(default_factory=lambda: EnvConfig(game=("maze",), split="train-1m"))
    """Where both play; one game (the teacher's)."""
    agent: AgentConfig = field(default_factory=AgentConfig)
    """The student: feed-forward (core none); default the Procgen paper's IMPALA agent (16-32-32, FC 256)."""
    teacher: str = "cheese-planner"
    """The planner imitated (:data:`~proclab.models.planners.PLANNERS`)."""
    rounds: int = 3
    """Round 0 plays the teacher, the later ones the student."""
    frames: int = 200_000
    """Frames gathered per round."""
    explore: float = 0.25
    """Round 0: the share of the teacher's steps replaced by a uniformly random action."""
    epochs: int = 2
    """Passes over every frame gathered so far, after each round."""
    batch: int = 256
    lr: float = 1e-3
    """Adam's learning rate."""
    position_coef: float = 1.0
    """Weight of the position heads' cross-entropy beside the action's."""
    seed: int = 1
    """Seeds the student's initialisation, the levels of each round and the sampling."""
    name: str = "imitation"
    run_root: Path = Path("runs")
    """Runs go to RUN_ROOT/imitation/GAME/NAME/SEED-TIMESTAMP."""

    def validate(self) -> None:
        games = self.env.games()
        if len(games) != 1:
            raise ProclabError(f"imitation plays one game, the teacher's; not {', '.join(games)}")
        planner(self.teacher, games[0])  # a one-line error for another game's planner
        if self.agent.core != "none":
            raise ProclabError(
                f"imitation trains feed-forward agents (core none), not core {self.agent.core!r}: "
                "a memory core would need whole sequences"
            )
        if self.rounds < 1 or self.frames < 1 or self.epochs < 1 or self.batch < 1:
            raise ProclabError("rounds, frames, epochs and batch must be at least 1")
        if not 0 <= self.explore <= 1:
            raise ProclabError(f"explore is a share of steps in [0, 1], not {self.explore}")


@dataclass
class Frames:
    """Gathered frames: ``obs`` (N, 3, 64, 64) uint8, the teacher's ``actions`` (N,), ``cells`` (N, 4): the
    agent's row and column, then the goal's (-1 where the goal is absent)."""

    obs: np.ndarray
    actions: np.ndarray
    cells: np.ndarray

    @staticmethod
    def cat(parts: list[Frames]) -> Frames:
        return Frames(*(np.concatenate([getattr(p, k) for p in parts]) for k in ("obs", "actions", "cells")))

    def save(self, path: Path) -> None:
        """Uncompressed: procgen's textured frames barely compress (0.8 of 2 GB for 160k) and slowly."""
        with replacing(path, "imitation frames") as tmp, open(tmp, "wb") as f:
            np.savez(f, obs=self.obs, actions=self.actions, cells=self.cells)

    @staticmethod
    def load(path: Path) -> Frames:
        with np.load(path) as z:
            return Frames(z["obs"], z["actions"], z["cells"])


def teacher_labels(teacher: StatePolicy, env: ProcgenVecEnv) -> tuple[np.ndarray, np.ndarray]:
    """The teacher's action and cells (:class:`Frames`) for every slot's present state."""
    actions, cells = [], []
    for data in env.slot_states():
        me, goal = teacher.cells(data)
        actions.append(teacher.act(data))
        cells.append((*me, *(goal if goal is not None else (-1, -1))))
    found = np.array(cells, np.int64)
    if found.max() >= CELLS:
        raise ProclabError(f"a cell lies beyond the position heads' {CELLS} rows and columns: {found.max()}")
    return np.array(actions, np.int64), found


def gather(
    env: ProcgenVecEnv,
    teacher: StatePolicy,
    frames: int,
    rng: np.random.Generator,
    runtime: Runtime,
    student: Agent | None = None,
    explore: float = 0.0,
    on_step=None,
) -> tuple[Frames, dict[str, float]]:
    """``frames`` frames of ``env`` labelled by ``teacher``; the teacher acts (``explore`` of its steps random)
    unless a ``student`` is given, which then acts with sampled actions. Also the episodes' share completed."""
    n = env.num_envs
    obs, _ = env.reset()
    teacher.watch(env)
    chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    held, ended, completed = 0, 0, 0
    while held < frames:
        actions, cells = teacher_labels(teacher, env)
        chunks.append((obs.copy(), actions, cells))
        held += n
        if student is None:
            acted = np.where(rng.random(n) < explore, rng.integers(0, NUM_ACTIONS, n), actions)
        else:
            with torch.inference_mode(), runtime.autocast():
                first = torch.zeros(n, dtype=torch.bool, device=runtime.device)
                logits = student.step(runtime.obs_tensor(obs), {}, first)[0].logits
            acted = torch.distributions.Categorical(logits=logits.float()).sample().cpu().numpy()
        obs, _, _, _, info = env.step(acted)
        ended += int(info["episode"]["done"].sum())
        completed += int(info["episode"]["level_complete"].sum())
        if on_step is not None:
            on_step(n)
    got = Frames(*(np.concatenate(parts)[:frames] for parts in zip(*chunks, strict=True)))
    return got, {"episodes": ended, "completed": completed / max(ended, 1)}


class PositionHeads(nn.Module):
    """Linear heads on the agent's FC features naming the agent's row and column and the goal's."""

    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, 4 * CELLS)

    def forward(self, features: Tensor) -> Tensor:
        return self.linear(features).view(-1, 4, CELLS)


def losses(
    agent: Agent, heads: PositionHeads, obs: Tensor, actions: Tensor, cells: Tensor, runtime: Runtime
) -> tuple[Tensor, Tensor, Tensor]:
    """The action's cross-entropy to the teacher's, the position heads' (mean over the four, absent goals
    left out), and the student's agreement with the teacher (argmax), for one batch."""
    seen: list[Tensor] = []

    def keep(_module, _inputs, features: Tensor) -> None:  # the FC features, (1, B, fc), with their graph
        seen.append(features)

    hook = agent.hook_features.register_forward_hook(keep)
    try:
        with runtime.autocast():
            logits = agent.step(obs, {}, torch.zeros(len(obs), dtype=torch.bool, device=obs.device))[0].logits
            where = heads(seen[0][0])
    finally:
        hook.remove()
    action_loss = F.cross_entropy(logits.float(), actions)
    position_loss = F.cross_entropy(where.float().reshape(-1, CELLS), cells.reshape(-1), ignore_index=-1)
    agreement = (logits.argmax(-1) == actions).float().mean()
    return action_loss, position_loss, agreement


def learn(
    agent: Agent,
    heads: PositionHeads,
    optimizer: torch.optim.Optimizer,
    data: Frames,
    config: ImitationConfig,
    runtime: Runtime,
    generator: torch.Generator,
    on_batch=None,
) -> dict[str, float]:
    """``config.epochs`` passes of minibatches over ``data``; the mean losses and agreement of the last pass."""
    obs, actions, cells = (torch.from_numpy(a) for a in (data.obs, data.actions, data.cells))
    n, b = len(actions), min(config.batch, len(actions))
    sums = np.zeros(3)
    for _ in range(config.epochs):
        order = torch.randperm(n, generator=generator)
        sums[:] = 0
        for start in range(0, n - b + 1, b):
            rows = order[start : start + b]
            action_loss, position_loss, agreement = losses(
                agent, heads, obs[rows].to(runtime.device), actions[rows].to(runtime.device),
                cells[rows].to(runtime.device), runtime,
            )  # fmt: skip
            optimizer.zero_grad(set_to_none=True)
            (action_loss + config.position_coef * position_loss).backward()
            optimizer.step()
            sums += [action_loss.item(), position_loss.item(), agreement.item()]
            if on_batch is not None:
                on_batch(b)
    count = max(n // b, 1)
    return dict(zip(("action_loss", "position_loss", "agreement"), (sums / count).tolist(), strict=True))


def imitate(
    config: ImitationConfig | None = None,
    run_dir: Path | None = None,
    progress: bool = True,
    rounds: int | None = None,
) -> Path:
    """Run (or, with ``run_dir``, resume) an imitation run; returns its directory, whose checkpoint after each
    round (``checkpoints/step_N``, N the frames gathered so far) is an agent ``proclab.load`` reads. ``rounds``
    with ``run_dir``: continue a run to this many rounds (config.json and config_history.jsonl record it)."""
    if run_dir is not None:
        config = resumed_config(Path(run_dir), rounds)
    elif config is None:
        raise ProclabError("give an ImitationConfig for a new run or the run_dir of one to resume")
    config.validate()
    return run(config, run_dir, progress)


def resumed_config(run_dir: Path, rounds: int | None) -> ImitationConfig:
    """The run's config, given ``rounds`` (recorded as a change) when they differ from its own."""
    config = from_dict(ImitationConfig, read_run_config(run_dir))
    if rounds is not None and rounds != config.rounds:
        changed = {"rounds": (config.rounds, rounds)}
        config = replace(config, rounds=rounds)
        config.validate()
        done = len(list((run_dir / "checkpoints").glob("step_*")))
        record_config_change(run_dir, to_dict(config), changed, done * config.frames)
    return config


def run(config: ImitationConfig, run_dir: Path | None, progress: bool) -> Path:
    """:func:`imitate`'s rounds, from the first one ``run_dir`` (None: a new run) has no checkpoint of."""
    runtime = config.runtime()
    game = config.env.games()[0]
    torch.manual_seed(config.seed)
    agent = build_agent(config.agent)
    heads = PositionHeads(config.agent.fc)
    optimizer = torch.optim.Adam([*agent.parameters(), *heads.parameters()], lr=config.lr)
    done, parts = 0, []
    if run_dir is None:
        run_dir = create_run_dir(
            config.run_root, ALGO, game_label((game,)), config.name, config.seed, to_dict(config)
        )
    elif any((run_dir / "checkpoints").glob("step_*")):
        last = load_checkpoint(find_checkpoint(run_dir), kind="agent", train_state=True)
        load_weights_into(agent, last.weights, run_dir)
        state = last.train_state or {}
        heads.load_state_dict(state["heads"])
        optimizer.load_state_dict(state["optimizer"])
        restore_rng_state(state["rng"])
        done = int(last.meta["round"]) + 1
        parts = [Frames.load(run_dir / "frames" / f"round_{r}.npz") for r in range(done)]
    agent, heads = runtime.prepare(agent), heads.to(runtime.device)
    teacher = planner(config.teacher, game)
    metrics = MetricsLogger(run_dir, tensorboard=False, resume_step=done * config.frames)

    def work(rounds: int) -> int:  # frames gathered and learned from in the first ``rounds`` rounds
        return sum(config.frames * (1 + config.epochs * (r + 1)) for r in range(rounds))

    started = time.time()
    with progress_bar(transient=True, disable=not progress) as bar:
        task = bar.add_task("imitate", total=work(config.rounds), completed=work(done))
        for r in range(done, config.rounds):
            bar.update(task, description=f"round {r}: gathering")
            env = ProcgenVecEnv(config.env, seed=config.seed * 1000 + r)
            agent.eval()
            frames, played = gather(
                env, teacher, config.frames, np.random.default_rng([config.seed, r]), runtime,
                student=agent if r else None, explore=config.explore, on_step=lambda k: bar.advance(task, k),
            )  # fmt: skip
            env.close()
            frames.save(run_dir / "frames" / f"round_{r}.npz")
            parts.append(frames)
            bar.update(task, description=f"round {r}: learning")
            agent.train()
            # seeded per round, so that a resumed round shuffles as the uninterrupted one did
            generator = torch.Generator().manual_seed(config.seed * 1000 + r)
            learned = learn(
                agent, heads, optimizer, Frames.cat(parts), config, runtime, generator,
                on_batch=lambda k: bar.advance(task, k),
            )  # fmt: skip
            step = (r + 1) * config.frames
            save_checkpoint(
                run_dir / "checkpoints" / f"step_{step:012d}",
                agent.state_dict(),
                {"kind": "agent", "algo": ALGO, "step": step, "round": r, "games": [game],
                 "agent": to_dict(config.agent), "env": to_dict(config.env), "train": to_dict(config)},
                {"heads": heads.state_dict(), "optimizer": optimizer.state_dict(), "rng": rng_state()},
            )  # fmt: skip
            played = {"round": r, **{f"play/{k}": v for k, v in played.items()}, **learned}
            metrics.log(step, time.time() - started, played)
    metrics.close()
    return run_dir
