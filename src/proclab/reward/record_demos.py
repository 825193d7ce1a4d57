"""Ranked-by-return demonstrations for T-REX, written to an episode store (``proclab trex demos``).

As in the procedural-generalization seed, each demo is **one episode on its own level**,
played by a checkpoint drawn uniformly at random from the given ones (a run directory
contributes all its periodic checkpoints, so skill varies with the checkpoint as well as with
the sampled actions), and cut at ``--max-len`` steps. Levels are drawn without replacement:
``train`` demos from ``[0, 1e9)`` and ``test`` demos from ``[1e9, 2e9)`` by default (the
seed's scheme; ``--levels START:NUM`` picks another range), never a level that a demo of the
same game in the store already uses: train and test demos never share a level, whatever the
ranges (``trex train`` checks it again when it loads them).

The demo id spells the level seed as ``P_ddd_ddd_ddd`` (level 1,203,931,872 -> ``1_203_931_872``),
which is the seed's id: prefix ``0`` for train and ``1`` for test levels under the default ranges.

Recording reuses :class:`~proclab.record.recorder.EpisodeRecorder` over a vector env whose
slots each play a queue of single-level games (:class:`LevelQueueEnv`), so the frames, actions
and rewards follow the store's timestep convention; a demo keeps ``obs``, ``action`` and
``reward`` per step (see :mod:`proclab.reward.demo_reader` for its per-demo columns).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from proclab.envs import EnvConfig, LevelSplit, ProcgenVecEnv, parse_split
from proclab.envs.episodes import quotas
from proclab.errors import ProclabError
from proclab.io.checkpoint import META, find_checkpoint
from proclab.io.progress import progress_bar
from proclab.models.loading import load_agent
from proclab.record import EpisodeRecorder
from proclab.reward.demo_reader import open_store
from proclab.run.runtime import Runtime, RuntimeConfig
from proclab.store import EpisodeStore, ShardWriter

DEFAULT_LEVELS = {"train": LevelSplit(0, 10**9, "trex-train"), "test": LevelSplit(10**9, 10**9, "trex-test")}
STEP_FIELDS = ("obs", "action", "reward")


def demo_id(level_seed: int) -> str:
    """``1203931872`` -> ``"1_203_931_872"`` (the seed's demo ids)."""
    return f"{level_seed // 10**9}_{level_seed // 10**6 % 1000:03d}_{level_seed // 1000 % 1000:03d}_{level_seed % 1000:03d}"


def list_checkpoints(paths) -> list[Path]:
    """The agents' checkpoints: a checkpoint directory for itself, a run directory for all of its checkpoints
    (oldest first)."""
    found: list[Path] = []
    for path in map(Path, paths):
        ckpt_dir = path / "checkpoints"
        if (path / META).is_file() or not ckpt_dir.is_dir():
            found.append(find_checkpoint(path))  # a checkpoint, or a one-line error saying why not
            continue
        inside = sorted(p for p in ckpt_dir.iterdir() if (p / META).is_file() and not p.name.startswith("."))
        if not inside:
            raise ProclabError(f"run directory {str(path)!r} has no checkpoints (nothing in {ckpt_dir})")
        found.extend(inside)
    if not found:
        raise ProclabError("give at least one agent (a run or checkpoint directory) with --agents")
    return found


def draw_levels(levels: LevelSplit, num: int, taken: set[int], rng: np.random.Generator) -> np.ndarray:
    """``num`` distinct level seeds of ``levels`` that are not in ``taken``."""
    free = levels.num - sum(1 for t in taken if t in levels)
    if num > free:
        raise ProclabError(f"asked for {num} demos but only {free} unused levels remain in {levels.label()}")
    if levels.num <= 4 * (num + len(taken)):  # small range: enumerate it
        pool = np.setdiff1d(np.arange(levels.start, levels.stop), np.fromiter(taken, np.int64, len(taken)))
        return rng.choice(pool, num, replace=False)
    chosen: dict[int, None] = {}
    while len(chosen) < num:
        for level in rng.integers(levels.start, levels.stop, num - len(chosen)).tolist():
            if level not in taken:
                chosen[level] = None
    return np.fromiter(chosen, np.int64, num)


class LevelQueueEnv:
    """A vector env whose slot ``i`` plays one episode on each level of ``queues[i]`` in turn.

    Each level runs in its own one-level Procgen env, so an episode ends where its level does
    (Procgen would otherwise start another level in the same env). An episode still running
    after ``max_len`` steps is cut (``truncated``) and the slot moves on. A slot whose queue is
    done ignores its actions. Same interface as :class:`~proclab.envs.ProcgenVecEnv`.
    """

    def __init__(self, config: EnvConfig, queues: list[list[int]], max_len: int, seed: int = 0):
        self.config = replace(
            config, num_envs=1, num_threads=1
        )  # a thread pool per env costs ~0.8 s to start
        self.games = self.config.games()
        self.queues = [list(q) for q in queues]
        self.num_envs = len(queues)
        self.game_index = np.zeros(self.num_envs, np.int64)
        self.max_len, self.seed = max_len, seed
        self.envs: list[ProcgenVecEnv | None] = [None] * self.num_envs
        self.obs = np.zeros((self.num_envs, 3, 64, 64), np.uint8)
        self.level = np.full(self.num_envs, -1, np.int64)
        self.ep_return = np.zeros(self.num_envs, np.float64)
        self.ep_length = np.zeros(self.num_envs, np.int64)

    def _next_level(self, i: int) -> None:
        if self.envs[i] is not None:
            self.envs[i].close()
            self.envs[i] = None
        if self.queues[i]:
            level = self.queues[i].pop(0)
            self.envs[i] = ProcgenVecEnv(self.config, seed=self.seed + level, split=LevelSplit(level, 1))
            obs, _ = self.envs[i].reset()
            self.obs[i], self.level[i] = obs[0], level
        self.ep_return[i] = self.ep_length[i] = 0

    def reset(self):
        for i in range(self.num_envs):
            self._next_level(i)
        return self.obs.copy(), {"level_seed": self.level.copy()}

    def step(self, actions):
        N = self.num_envs
        reward = np.zeros(N, np.float32)
        terminated, truncated, complete = np.zeros(N, bool), np.zeros(N, bool), np.zeros(N, bool)
        episode = {"return": np.zeros(N), "length": np.zeros(N, np.int64), "level_seed": np.full(N, -1)}
        for i, env in enumerate(self.envs):
            if env is None:
                continue
            obs, r, term, trunc, info = env.step(np.asarray(actions[i : i + 1]))
            reward[i] = r[0]
            self.ep_return[i] += r[0]
            self.ep_length[i] += 1
            self.obs[i] = obs[0]
            terminated[i], complete[i] = term[0], info["episode"]["level_complete"][0]
            truncated[i] = trunc[0] or (not term[0] and self.ep_length[i] >= self.max_len)
            if terminated[i] or truncated[i]:
                episode["return"][i], episode["length"][i] = self.ep_return[i], self.ep_length[i]
                episode["level_seed"][i] = self.level[i]
                self._next_level(i)
        done = terminated | truncated
        episode |= {"done": done, "level_complete": complete & done}
        info = {"level_seed": self.level.copy(), "episode": episode}
        return self.obs.copy(), reward, terminated, truncated, info

    def close(self) -> None:
        for i in range(self.num_envs):
            if self.envs[i] is not None:
                self.envs[i].close()
                self.envs[i] = None


def record_demos(
    agents: list[Path],
    out: Path,
    num: int,
    split: str,
    *,
    runtime: Runtime,
    game: str | None = None,
    levels: str | None = None,
    max_len: int = 1000,
    num_envs: int = 16,
    use_backgrounds: bool | None = None,
    seed: int = 0,
    progress: bool = True,
) -> int:
    """Record ``num`` demos into the store ``out`` by ``agents`` (run or checkpoint directories, computing on
    ``runtime``); returns how many were written."""
    if num < 1 or max_len < 1 or num_envs < 1:
        raise ProclabError(f"--num ({num}), --max-len ({max_len}) and --num-envs ({num_envs}) must be >= 1")
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    ckpts = list_checkpoints(agents)
    level_range = parse_split(levels) if levels else DEFAULT_LEVELS[split]
    if not level_range.bounded:
        raise ProclabError("--levels must be a bounded range START:NUM")
    which = rng.integers(0, len(ckpts), num)  # a uniformly random checkpoint per demo
    agents: dict[int, tuple] = {}
    for c in np.unique(which):
        agent, env_config, ckpt = load_agent(ckpts[c], runtime)
        games = env_config.games()
        game = game or games[0]
        if game not in games:
            raise ProclabError(f"checkpoint {str(ckpt.path)!r} plays {', '.join(games)}, not {game}")
        agents[int(c)] = (agent, env_config, ckpt)
    env_config = replace(next(iter(agents.values()))[1], game=(game,))
    if use_backgrounds is not None:
        env_config = replace(env_config, use_backgrounds=use_backgrounds)
    use_backgrounds = env_config.use_backgrounds

    chosen = draw_levels(level_range, num, _levels_in_store(out, game), rng)
    meta = {"mode": env_config.mode, "split": split, "max_len": max_len, "use_backgrounds": use_backgrounds}
    written = 0
    with (
        ShardWriter(out, attrs={"trex_demos": meta}) as writer,
        progress_bar(transient=True, disable=not progress) as bar,
    ):
        task = bar.add_task(f"{split} demos", total=num)
        for c, (agent, _, ckpt) in agents.items():
            todo = chosen[which == c].tolist()
            slots = min(num_envs, len(todo))
            cuts = np.cumsum(quotas(len(todo), slots))[:-1]
            queues = [q.tolist() for q in np.split(np.asarray(todo), cuts)]
            env = LevelQueueEnv(env_config, queues, max_len, seed=seed)
            recorder = EpisodeRecorder(env, agent, runtime, split=split)

            def sink(steps, info, ckpt=ckpt):
                writer.append(
                    {k: steps[k] for k in STEP_FIELDS},
                    {
                        "demo_id": demo_id(info["level_seed"]),
                        "game": game,
                        "mode": env_config.mode,
                        "split": split,
                        "level_seed": info["level_seed"],
                        "return": info["return"],
                        "truncated": bool(steps["truncated"][-1]),
                        "checkpoint": str(ckpt.path),
                        "checkpoint_step": ckpt.step,
                    },
                )
                bar.advance(task)

            try:
                written += recorder.run(len(todo), sink)
            finally:
                env.close()
    return written


def trex_demos(
    agents: Iterable[str | Path],
    game: str | None = None,
    *,
    out: str | Path,
    train: int = 100,
    test: int = 0,
    max_len: int = 1000,
    num_envs: int = 16,
    use_backgrounds: bool | None = None,
    seed: int = 0,
    runtime: Runtime | None = None,
    progress: bool = True,
) -> EpisodeStore:
    """Record ``train`` demos to learn from and ``test`` demos on held-out levels into the demo store ``out``
    (created, or added to); returns the store.

    ``agents``: checkpoints or run directories (a run: all its periodic checkpoints, whose skill varies),
    one drawn at random per demo; ``game``: the game they play (default: theirs). Each split is what
    ``proclab trex demos --split`` records (:func:`record_demos`), the test demos seeded ``seed + 1`` so
    that their draws of checkpoint and actions are not the train demos' again. ``runtime``: where the agents
    compute (default: the command's defaults, ``--device auto --precision auto``).
    """
    runtime = runtime or RuntimeConfig().runtime()
    if train < 0 or test < 0 or train + test == 0:
        raise ProclabError(f"record at least one demo: train={train}, test={test}")
    for split, num, split_seed in (("train", train, seed), ("test", test, seed + 1)):
        if num:
            record_demos(
                list(agents),
                Path(out),
                num,
                split,
                game=game,
                max_len=max_len,
                num_envs=num_envs,
                use_backgrounds=use_backgrounds,
                runtime=runtime,
                seed=split_seed,
                progress=progress,
            )
    return open_store(out)


def _levels_in_store(path: Path, game: str) -> set[int]:
    """Levels of ``game``'s demos already in the store (train and test): a new demo avoids them all."""
    if not (Path(path) / "zarr.json").is_file():
        return set()
    table = EpisodeStore(path).episodes
    if "demo_id" not in table:
        raise ProclabError(
            f"{str(path)!r} holds episodes that are not T-REX demos; write demos to their own store"
        )
    return set(table["level_seed"][table["game"] == game].astype(np.int64).tolist())


def write_synthetic_demos(
    path: str | Path,
    num_train: int = 12,
    num_test: int = 8,
    *,
    game: str = "starpilot",
    lengths: tuple[int, int] = (30, 90),
    constant_return: bool = False,
    seed: int = 0,
    flip_train: bool = False,
) -> Path:
    """A demo store whose frames show the reward: a bright patch on each frame that earns one.

    Demos differ in length and reward rate (skill); test demos sit on levels from 1e9 on, as
    ``trex demos`` records them. A reward net can learn this quickly, which makes the store a
    small, known-answer workload for tests and the speed benchmark. ``flip_train`` records each
    train demo's return negated, so the preferences T-REX learns from rank them backwards (a
    control: the reward learned from it must fail on the test demos' true returns).
    """
    rng = np.random.default_rng(seed)
    with ShardWriter(path) as writer:
        for n in range(num_train + num_test):
            split = "train" if n < num_train else "test"
            level = n if split == "train" else 10**9 + n
            T = int(rng.integers(*lengths))
            rewards = np.zeros(T, np.float32)
            if not constant_return:
                rewards[rng.random(T) < rng.uniform(0.05, 0.5)] = 1.0
            frames = rng.integers(0, 40, (T, 3, 64, 64), dtype=np.uint8)
            frames[rewards > 0, 0, :16, :16] = 250
            writer.append(
                {"obs": frames, "action": rng.integers(0, 15, T), "reward": rewards},
                {
                    "demo_id": demo_id(level),
                    "game": game,
                    "mode": "easy",
                    "split": split,
                    "level_seed": level,
                    "return": float(rewards.sum()) * (-1 if flip_train and split == "train" else 1),
                    "truncated": False,
                    "checkpoint": "synthetic",
                    "checkpoint_step": 0,
                },
            )
    return Path(path)
