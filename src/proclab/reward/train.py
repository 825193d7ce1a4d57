"""Learn a per-frame reward from demos ranked by return (T-REX, ``proclab trex train``).

Pipeline (docs/trex.md): pick ``--num-demos`` training demos spread over the returns, 80/20
train/validation; build clip pairs with the progress heuristic (:mod:`proclab.reward.pairs`);
fit a reward net with the Bradley-Terry loss on summed per-frame rewards plus L1 and weight
decay (:mod:`proclab.reward.loss`); after each epoch measure train and validation pair
accuracy and stop when validation accuracy has not improved for ``--patience`` epochs. The
best weights are then measured on demos from held-out levels: Pearson/Spearman of predicted
vs true return on **all** test demos, always next to the +1-per-step baseline, and accuracy
on test pairs: pairs built as the training ones (progress heuristic) and pairs whose clips start
anywhere in their demos, each beside the accuracy of the step index as a reward (which wins
heuristic pairs knowing nothing of the return) and of the clips' true returns.

**Presets: batched and parity.** By default (``--preset batched``) each Adam step scores ``--batch-size`` (256) fresh pairs drawn
among ``--demos-per-step`` (8) random training demos, so that their clips share frames and each
distinct frame goes through the net once: a step costs about one pass over 8 demos however many
pairs it scores. Over steps the pairs follow the seed's distribution (uniform demo pairs with
different returns, the same clip sampling). Inputs are /255, Adam lr 3e-4, bf16 where the
hardware has it. ``--preset parity`` reproduces the seed: a fixed set of ``--num-pairs`` pairs, one
pair per step, lr 5e-5, raw 0..255 pixels, fp32, epochs of 1000 pairs and the seed's per-epoch test
metrics on its first 100 test demos (flags still override single fields).

Outputs in ``RUN_ROOT/trex/GAME/NAME/SEED-TIME/``: ``config.json``, ``train_log.csv`` (one
row per epoch, the seed's columns plus timings), ``checkpoints/best`` (the reward model), and
a summary row appended to ``--summary`` (the seed's ``rm_infos.csv`` columns plus ours).
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import torch
import tyro

from proclab.errors import ProclabError, unknown_choice
from proclab.io.checkpoint import load_checkpoint, load_weights_into, save_checkpoint
from proclab.io.configs import to_dict, with_fields
from proclab.io.files import disk_errors, replacing
from proclab.io.progress import progress_bar
from proclab.io.run_dirs import create_run_dir
from proclab.reward.control import CONTROL_STATS, length_control
from proclab.reward.demo_reader import Demos, demo_table, open_store, read_demos
from proclab.reward.loss import clip_rewards, distinct_frames, trex_loss
from proclab.reward.metrics import correlations, pair_accuracy
from proclab.reward.nets import RewardModel, RewardNet, RewardNetConfig, save_reward_model
from proclab.reward.pairs import ClipPairs, clip_frames, make_pairs, stratified_pick, train_val_split
from proclab.run.runtime import Runtime, RuntimeConfig, restore_rng_state, rng_state, seed_everything
from proclab.store import EpisodeStore

PROGRESS = "progress"
"""``RUN/progress``: the checkpoint of the last finished epoch (weights, optimiser, RNGs, best so far)."""
LOG_COLUMNS = (
    "epoch",
    "n_train_samples",
    "train_acc",
    "train_loss",
    "val_acc",
    "val_loss",
    "test_acc",
    "test_loss",
    "pearson",
    "spearman",
    "train_seconds",
    "wall_seconds",
)
SEED_SUMMARY = (
    "rm_id",
    "method",
    "env_name",
    "mode",
    "num_dems",
    "max_return",
    "max_length",
    "sequential",
    "train_acc",
    "val_acc",
    "test_acc",
    "pearson",
    "spearman",
)
CONTROL_COLUMNS = (
    *(
        f"{stat}{end}"
        for stat in CONTROL_STATS
        for end in (("",) if stat not in ("spearman", "baseline_spearman") else ()) + ("_lo", "_hi")
    ),
    "length_bins",
)
"""The length control's columns (:mod:`proclab.reward.control`); spearman and baseline_spearman
themselves are already seed columns, their CI bounds are added."""
SUMMARY_COLUMNS = (
    *SEED_SUMMARY,
    "baseline_pearson",
    "baseline_spearman",
    *CONTROL_COLUMNS,
    "test_loss",
    "gt_test_acc",
    "progress_test_acc",
    "test_acc_uniform",
    "gt_test_acc_uniform",
    "progress_test_acc_uniform",
    "test_demos",
    "seed",
    "net",
    "scale_input",
    "batch_size",
    "best_epoch",
    "epochs",
    "train_seconds",
    "wall_seconds",
    "run_dir",
)


@dataclass(frozen=True)
class TrexConfig(RuntimeConfig):
    """Learn a reward model from ranked demos (T-REX) and measure it on demos from held-out levels."""

    demos: Annotated[Path, tyro.conf.arg(name="data", metavar="DATA")] = Path("demos")
    """Demo store written by 'proclab trex demos' (train and test demos)."""
    game: str | None = None
    """Game whose demos to use (default: the store's only game)."""
    mode: str = "easy"
    """Distribution mode of the demos to use."""
    num_demos: int = 12
    """Training demos to pick, spread over 4 return bins (80% train, 20% validation)."""
    max_return: float = 1.0
    """Pick only demos with return <= min + max_return * (max - min) (extrapolation studies)."""
    num_pairs: int = 50_000
    """Training clip pairs drawn up front, for --demos-per-step 0 (the seed's num_snippets)."""
    val_pairs: int = 1000
    """Validation clip pairs."""
    test_pairs: int = 1000
    """Test clip pairs, from the first --test-pair-demos test demos (as many again with uniform clip starts)."""
    test_pair_demos: int = 100
    """Test demos that test pairs (and the seed's per-epoch correlations) are drawn from."""
    min_clip_len: int = 20
    """Shortest clip (demos must be longer)."""
    max_clip_len: int = 100
    """Clip lengths are drawn below this (the seed: 20..99)."""
    stride: int = 1
    """Use every stride-th frame of a clip (T-REX Atari: 2)."""
    progress_heuristic: bool = True
    """The better demo's clip never starts earlier than the worse one's."""
    net: RewardNetConfig = field(default_factory=RewardNetConfig)
    batch_size: int = 256
    """Clip pairs per Adam step (the seed: 1)."""
    demos_per_step: int = 8
    """Draw each batch's pairs afresh among this many random training demos, so that they share frames
    (0: batches from the fixed set of --num-pairs pairs, as the seed)."""
    lr: float = 3e-4
    """Adam learning rate."""
    weight_decay: float = 0.01
    """Adam's (coupled, L2) weight decay, as the seed."""
    lam_l1: float = 1e-3
    """Weight of the L1 penalty on the per-frame rewards of both clips."""
    frame_chunk: int = 1024
    """Most frames through the net at once (bounds memory; bigger batches take two passes, same gradient)."""
    epoch_pairs: int = 4096
    """Training pairs per epoch (an evaluation and early-stopping check after each; the seed: 1000)."""
    max_epochs: int = 50
    """Upper bound on epochs."""
    patience: int = 10
    """Stop after this many epochs without a strictly better validation accuracy."""
    time_limit: float = 0
    """Also stop once training (evaluations excluded) has taken this many seconds (0: no limit)."""
    eval_pairs: int = 1000
    """Fresh training pairs that the per-epoch train accuracy is measured on."""
    epoch_test_metrics: bool = False
    """Also log test accuracy and correlations (first --test-pair-demos test demos) every epoch, as the seed."""
    parity: tyro.conf.Suppress[bool] = False
    """Whether these defaults are the seed's (--preset parity; recorded in the run, and trex grid names its
    runs after it)."""
    seed: int = 0
    """Seed of demo selection, pairs, initial weights and batches."""
    name: str = "default"
    """Experiment name: runs go to RUN_ROOT/trex/GAME/NAME/SEED-TIMESTAMP."""
    run_root: Path = Path("runs")
    """Where run directories are created."""
    summary: Path | None = None
    """CSV the summary row is appended to (default: RUN_ROOT/trex/rm_infos.csv)."""
    length_bins: int = 10
    """Equal-count length bins of the test demos for the binned Spearman (the length control)."""
    control_bootstrap: int = 1000
    """Bootstrap resamples of the test demos for the control's 95% CIs (0: no CIs)."""


TREX_PRESETS: dict[str, TrexConfig] = {
    # proclab's: many pairs per Adam step that share frames (module docstring)
    "batched": TrexConfig(),
    # procedural-generalization's train_reward.py: one pair per step, raw pixels, fp32
    "parity": TrexConfig(
        parity=True,
        batch_size=1,
        demos_per_step=0,
        lr=5e-5,
        epoch_pairs=1000,
        net=RewardNetConfig(scale_input=False),
        epoch_test_metrics=True,
        precision="fp32",
    ),
}


def trex_preset(name: str) -> TrexConfig:
    """The defaults of preset ``name``; a :class:`ProclabError` naming the valid ones otherwise."""
    if name not in TREX_PRESETS:
        raise unknown_choice("T-REX preset", name, TREX_PRESETS)
    return TREX_PRESETS[name]


@dataclass
class PairSet:
    """Clip pairs as tensors of global frame rows: ``first`` ``(P, 2)`` (worse, better), ``length`` ``(P,)``."""

    first: torch.Tensor
    length: torch.Tensor

    @classmethod
    def build(cls, pairs: ClipPairs, demo_rows: np.ndarray, demos: Demos, device) -> PairSet:
        first = demos.offsets[demo_rows[pairs.demo]] + pairs.start
        return cls(torch.from_numpy(first).to(device), torch.from_numpy(pairs.length).to(device))

    def take(self, rows: torch.Tensor) -> PairSet:
        return PairSet(self.first[rows], self.length[rows])

    def true_returns(self, rewards: np.ndarray, stride: int) -> np.ndarray:
        """``(P, 2)`` clip returns under a per-frame reward given for every frame row (the true reward, or
        the step index): how often the clips' own returns agree with the demos' ranking."""
        index, mask = clip_frames(self.first.cpu(), self.length.cpu(), stride)
        return (torch.from_numpy(rewards)[index] * mask).sum(-1).numpy()

    def __len__(self) -> int:
        return len(self.length)


class RewardLearner:
    """The reward net, its optimiser and the frames: one Adam step per batch of pairs, and evaluations.

    At most ``frame_chunk`` frames go through the net at once. A batch whose clips use more
    distinct frames is scored in two passes: rewards without a graph, the loss's gradient with
    respect to them, then the net again chunk by chunk, back-propagating that gradient. The
    gradient is the one a single pass would give; the memory is bounded by the chunk.
    """

    def __init__(self, cfg: TrexConfig, demos: Demos, rt: Runtime):
        self.cfg, self.rt = cfg, rt
        self.net = rt.prepare(RewardNet(cfg.net))
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.frames = torch.from_numpy(demos.frames).to(rt.device)

    def rewards(self, rows: torch.Tensor) -> torch.Tensor:
        """``r(frames[rows])`` in fp32, chunk by chunk (no graph unless gradients are enabled)."""
        out = []
        for chunk in rows.split(self.cfg.frame_chunk):
            with self.rt.autocast():
                out.append(self.net(self.frames[chunk]).float())
        return torch.cat(out)

    def step(self, pairs: PairSet) -> None:
        unique, inverse, mask = distinct_frames(pairs.first, pairs.length, self.cfg.stride)
        self.optimizer.zero_grad(set_to_none=True)
        if len(unique) <= self.cfg.frame_chunk:
            loss, _ = trex_loss(clip_rewards(self.rewards(unique), inverse, mask), self.cfg.lam_l1)
            loss.mean().backward()
        else:
            with torch.no_grad():
                r = self.rewards(unique)
            r.requires_grad_(True)
            loss, _ = trex_loss(clip_rewards(r, inverse, mask), self.cfg.lam_l1)
            (grad,) = torch.autograd.grad(loss.mean(), r)
            for rows, g in zip(
                unique.split(self.cfg.frame_chunk), grad.split(self.cfg.frame_chunk), strict=True
            ):
                with self.rt.autocast():
                    self.net(self.frames[rows]).float().backward(g)
        self.optimizer.step()

    @torch.inference_mode()
    def evaluate(self, pairs: PairSet) -> tuple[float, float]:
        """Pair accuracy and mean loss over ``pairs``."""
        unique, inverse, mask = distinct_frames(pairs.first, pairs.length, self.cfg.stride)
        loss, returns = trex_loss(clip_rewards(self.rewards(unique), inverse, mask), self.cfg.lam_l1)
        return pair_accuracy(returns.cpu().numpy()), float(loss.mean())

    @torch.inference_mode()
    def predict_returns(self, demos: Demos, demo_rows: np.ndarray) -> np.ndarray:
        """Predicted return (summed per-frame reward) of each demo in ``demo_rows``."""
        rows = np.concatenate(
            [np.arange(demos.offsets[d], demos.offsets[d] + demos.lengths[d]) for d in demo_rows]
        )
        r = self.rewards(torch.from_numpy(rows).to(self.rt.device)).cpu().numpy()
        return np.add.reduceat(
            r.astype(np.float64), np.concatenate([[0], np.cumsum(demos.lengths[demo_rows])[:-1]])
        )


def _split_rows(cfg: TrexConfig, table: dict[str, np.ndarray], rng: np.random.Generator):
    """Store rows of the train, validation and test demos (eligible: longer than the shortest clip)."""
    long_enough = table["length"] > cfg.min_clip_len
    train_all = np.flatnonzero(long_enough & (table["split"] == "train"))
    test = np.flatnonzero(long_enough & (table["split"] == "test"))
    shared = set(table["level_seed"][train_all].tolist()) & set(table["level_seed"][test].tolist())
    if shared:
        raise ProclabError(
            f"train and test demos share {len(shared)} level(s), e.g. {min(shared)}: test levels must be held out"
        )
    if len(test) == 0:
        raise ProclabError(
            f"no test demos longer than {cfg.min_clip_len} steps in {str(cfg.demos)!r}; record some with "
            "'proclab trex demos --split test' (the learned reward is measured on held-out levels)"
        )
    picked = stratified_pick(table["return"][train_all], cfg.num_demos, rng, cfg.max_return)
    train, val = train_val_split(train_all[picked])
    return train, val, test


@dataclass(frozen=True)
class _DemoSplit:
    """A run's demos in one array: stratified-pick training and validation rows, held-out-level test rows."""

    game: str
    demos: Demos
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    test_pair_demos: np.ndarray  # the test demos that test pairs are drawn from

    @classmethod
    def load(cls, cfg: TrexConfig, rng: np.random.Generator) -> _DemoSplit:
        store = open_store(cfg.demos)
        game, table = demo_table(store, cfg.game, cfg.mode)
        train_rows, val_rows, test_rows = _split_rows(cfg, table, rng)
        order = np.concatenate([train_rows, val_rows, test_rows])
        demos = read_demos(store, table["index"][order])
        train_d = np.arange(len(train_rows))
        val_d = len(train_rows) + np.arange(len(val_rows))
        test_d = len(train_rows) + len(val_rows) + np.arange(len(test_rows))
        return cls(game, demos, train_d, val_d, test_d, test_d[: cfg.test_pair_demos])


class _PairMaker:
    """Clip pairs among chosen demos, on the training device, from the run's one random stream."""

    def __init__(self, cfg: TrexConfig, split: _DemoSplit, rng: np.random.Generator, device):
        self.cfg, self.split, self.rng, self.device = cfg, split, rng, device

    def __call__(
        self, demo_rows: np.ndarray, num: int, what: str, progress: bool | None = None, rng=None
    ) -> PairSet:
        """``num`` pairs among ``demo_rows``; ``progress`` (default: the config's) and ``rng`` (default: the
        run's stream) may be changed for pairs made only to measure."""
        cfg, demos = self.cfg, self.split.demos
        made = make_pairs(
            demos.lengths[demo_rows],
            demos.returns[demo_rows],
            num,
            self.rng if rng is None else rng,
            min_len=cfg.min_clip_len,
            max_len=cfg.max_clip_len,
            stride=cfg.stride,
            progress=cfg.progress_heuristic if progress is None else progress,
            what=what,
        )
        return PairSet.build(made, demo_rows, demos, self.device)

    def epoch_batches(self, fixed: PairSet | None):
        """An epoch's batches: from the fixed pair set (the seed), or fresh pairs among a few demos per step."""
        cfg, rng, train_d = self.cfg, self.rng, self.split.train
        if fixed is not None:
            perm = torch.from_numpy(rng.permutation(len(fixed))[: cfg.epoch_pairs]).to(self.device)
            yield from (fixed.take(rows) for rows in perm.split(cfg.batch_size))
            return
        for _ in range(cfg.epoch_pairs // cfg.batch_size):
            group = rng.choice(train_d, min(cfg.demos_per_step, len(train_d)), replace=False)
            while (
                len(np.unique(self.split.demos.returns[group])) < 2
            ):  # ends: the training returns differ (checked when the first pairs were made)
                group = rng.choice(train_d, min(cfg.demos_per_step, len(train_d)), replace=False)
            yield self(group, cfg.batch_size, "training")


@dataclass
class _Best:
    """The weights of the epoch with the best validation accuracy so far."""

    val_acc: float = -1.0
    train_acc: float = float("nan")
    epoch: int = -1
    state: dict | None = None


@dataclass
class _Progress:
    """Where the epochs stand: saved after each epoch in ``RUN/progress`` (a checkpoint), so that a
    stopped run resumes exactly and a finished one is known to be finished."""

    epoch: int = 0
    seen: int = 0
    train_seconds: float = 0.0
    without_gain: int = 0
    best: _Best = field(default_factory=_Best)
    stopped: str | None = None
    """Why the run stopped before ``max_epochs`` on its own (no validation gain), else None."""

    def save(self, run_dir: Path, learner: RewardLearner, rng: np.random.Generator) -> None:
        state = {
            **rng_state(),
            "numpy_rng": rng.bit_generator.state,
            "optimizer": learner.optimizer.state_dict(),
            "counters": [self.epoch, self.seen, self.train_seconds, self.without_gain],
            "best": [self.best.val_acc, self.best.train_acc, self.best.epoch, self.best.state],
        }
        meta = {"kind": PROGRESS, "step": self.epoch, "finished": self.stopped}
        save_checkpoint(run_dir / PROGRESS, learner.net.state_dict(), meta, state)

    @classmethod
    def resume(cls, run_dir: Path, learner: RewardLearner, rng: np.random.Generator) -> _Progress:
        ckpt = load_checkpoint(run_dir / PROGRESS, kind=PROGRESS, train_state=True)
        load_weights_into(learner.net, ckpt.weights, ckpt.path)
        state = ckpt.train_state
        learner.optimizer.load_state_dict(state["optimizer"])
        restore_rng_state(state)
        rng.bit_generator.state = state["numpy_rng"]
        epoch, seen, seconds, without_gain = state["counters"]
        best = _Best(*state["best"])
        return cls(epoch, seen, seconds, without_gain, best, ckpt.meta.get("finished"))


def _epoch_row(cfg: TrexConfig, learner: RewardLearner, make: _PairMaker, pairs: dict, epoch: int) -> dict:
    """The evaluation columns of an epoch's log row (fresh training pairs after the first epoch)."""
    demos, test_pair_d = make.split.demos, make.split.test_pair_demos
    eval_pairs = pairs["eval"] if epoch == 1 else make(make.split.train, cfg.eval_pairs, "training")
    row = {}
    row["train_acc"], row["train_loss"] = learner.evaluate(eval_pairs)
    row["val_acc"], row["val_loss"] = learner.evaluate(pairs["val"])
    if cfg.epoch_test_metrics:
        row["test_acc"], row["test_loss"] = learner.evaluate(pairs["test"])
        pred = learner.predict_returns(demos, test_pair_d)
        corr = correlations(pred, demos.returns[test_pair_d], demos.lengths[test_pair_d])
        row["pearson"], row["spearman"] = corr["pearson"], corr["spearman"]
    return row


def _train_epochs(
    cfg: TrexConfig,
    learner: RewardLearner,
    make: _PairMaker,
    pairs: dict[str, PairSet | None],
    run_dir: Path,
    done: _Progress,
    progress: bool,
) -> _Progress:
    """Epochs from ``done`` on until ``patience`` epochs bring no better validation accuracy (or
    ``max_epochs``, or time is up), one log row and one progress checkpoint each."""
    start = time.time()
    with (
        _TrainLog(run_dir / "train_log.csv", done.epoch) as log,
        progress_bar(transient=True, disable=not progress) as bar,
    ):
        task = bar.add_task("trex train", total=cfg.max_epochs, completed=done.epoch)
        while done.epoch < cfg.max_epochs and done.stopped is None:
            done.epoch += 1
            t0 = time.time()
            for batch in make.epoch_batches(pairs["fixed"]):
                learner.step(batch)
                done.seen += len(batch)
            done.train_seconds += time.time() - t0
            row = {
                "epoch": done.epoch,
                "n_train_samples": done.seen,
                "train_seconds": round(done.train_seconds, 3),
            }
            row |= _epoch_row(cfg, learner, make, pairs, done.epoch)
            row["wall_seconds"] = round(time.time() - start, 3)
            log.write(row)
            bar.update(task, advance=1, description=f"trex train  val acc {row['val_acc']:.3f}")
            if row["val_acc"] > done.best.val_acc:
                state = {k: v.detach().clone() for k, v in learner.net.state_dict().items()}
                done.best, done.without_gain = _Best(row["val_acc"], row["train_acc"], done.epoch, state), 0
            else:
                done.without_gain += 1
            if done.without_gain >= cfg.patience and done.epoch < cfg.max_epochs:
                done.stopped = f"no better validation accuracy in {cfg.patience} epochs"
            done.save(run_dir, learner, make.rng)
            if 0 < cfg.time_limit <= done.train_seconds:
                break
    return done


class _TrainLog:
    """``train_log.csv``: one row per epoch; a resumed run keeps the rows of the epochs it resumes after."""

    def __init__(self, path: Path, after_epoch: int):
        self.path, self.after = path, after_epoch

    def __enter__(self) -> _TrainLog:
        kept = []
        if self.after and self.path.is_file():
            with open(self.path, newline="") as f:
                kept = [
                    r
                    for r in csv.DictReader(f)
                    if r.get("epoch", "").isdigit() and int(r["epoch"]) <= self.after
                ]
        with replacing(self.path, "T-REX training log") as tmp, open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=LOG_COLUMNS, restval="")
            writer.writeheader()
            writer.writerows(kept)
        self.file = open(self.path, "a", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=LOG_COLUMNS, restval="")
        return self

    def write(self, row: dict) -> None:
        with disk_errors(self.path, "T-REX training log"):
            self.writer.writerow(row)
            self.file.flush()

    def __exit__(self, *exc) -> None:
        self.file.close()


def train_reward(cfg: TrexConfig, progress: bool = True, resume: Path | None = None) -> dict:
    """Train a reward model as ``cfg`` says (or continue the run ``resume``); returns the summary row
    (see ``SUMMARY_COLUMNS``)."""
    started = time.time()
    rt = cfg.runtime()
    seed_everything(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    if cfg.num_demos < 2 or cfg.batch_size < 1 or cfg.epoch_pairs < cfg.batch_size:
        raise ProclabError(
            f"need --num-demos >= 2 ({cfg.num_demos}) and 1 <= --batch-size ({cfg.batch_size}) "
            f"<= --epoch-pairs ({cfg.epoch_pairs})"
        )
    split = _DemoSplit.load(cfg, rng)
    demos, game, train_d, test_d = split.demos, split.game, split.train, split.test
    make = _PairMaker(cfg, split, rng, rt.device)
    pairs = {"eval": make(train_d, cfg.eval_pairs, "training")}  # also checks that training returns differ
    pairs["fixed"] = None if cfg.demos_per_step else make(train_d, cfg.num_pairs, "training")
    pairs["val"] = make(split.val, cfg.val_pairs, "validation")
    pairs["test"] = make(split.test_pair_demos, cfg.test_pairs, "test")

    learner = RewardLearner(cfg, demos, rt)
    if resume is None:
        run_dir = create_run_dir(cfg.run_root, "trex", game, cfg.name, cfg.seed, to_dict(cfg))
        done = _Progress()
    else:
        run_dir, done = resume, _Progress.resume(resume, learner, rng)
    done = _train_epochs(cfg, learner, make, pairs, run_dir, done, progress)
    best, test_pairs = done.best, pairs["test"]

    # -- the best weights on held-out levels ----------------------------------------------------
    learner.net.load_state_dict(best.state)
    test_acc, test_loss = learner.evaluate(test_pairs)
    # The training pairs' progress heuristic makes the better clip start no earlier, so on such pairs any
    # reward that grows with time beats 0.5 knowing nothing of who won; pairs whose clips start anywhere
    # in their demos (drawn from a stream of their own: the run's training draws stay as they were) are
    # scored too, with the accuracy of such a time-only reward (the step index) beside each.
    uniform = make(split.test_pair_demos, cfg.test_pairs, "test", False, np.random.default_rng((cfg.seed, 1)))
    step_index = np.arange(len(demos.rewards)) - np.repeat(demos.offsets, demos.lengths)
    predicted, true, lengths = (
        learner.predict_returns(demos, test_d),
        demos.returns[test_d],
        demos.lengths[test_d],
    )
    corr = correlations(predicted, true, lengths)
    checkpoints = None if demos.checkpoints is None else demos.checkpoints[test_d]
    control = length_control(
        predicted,
        true,
        lengths,
        cfg.length_bins,
        bootstrap=cfg.control_bootstrap,
        seed=cfg.seed,
        checkpoint=checkpoints,
    )
    picked = np.concatenate([train_d, split.val])
    summary = {
        "rm_id": run_dir.name,
        "method": "trex",
        "env_name": game,
        "mode": cfg.mode,
        "num_dems": cfg.num_demos,
        "max_return": float(demos.returns[picked].max()),
        "max_length": int(demos.lengths[picked].max()),
        "sequential": 0,
        "train_acc": best.train_acc,
        "val_acc": best.val_acc,
        "test_acc": test_acc,
        **corr,
        **{k: control[k] for k in CONTROL_COLUMNS},
        "test_loss": test_loss,
        "gt_test_acc": pair_accuracy(test_pairs.true_returns(demos.rewards, cfg.stride)),
        "progress_test_acc": pair_accuracy(test_pairs.true_returns(step_index, cfg.stride)),
        "test_acc_uniform": learner.evaluate(uniform)[0],
        "gt_test_acc_uniform": pair_accuracy(uniform.true_returns(demos.rewards, cfg.stride)),
        "progress_test_acc_uniform": pair_accuracy(uniform.true_returns(step_index, cfg.stride)),
        "test_demos": len(test_d),
        "seed": cfg.seed,
        "net": cfg.net.arch,
        "scale_input": cfg.net.scale_input,
        "batch_size": cfg.batch_size,
        "best_epoch": best.epoch,
        "epochs": done.epoch,
        "train_seconds": round(done.train_seconds, 3),
        "wall_seconds": round(time.time() - started, 3),
        "run_dir": str(run_dir),
    }
    save_reward_model(
        run_dir / "checkpoints" / "best",
        learner.net,
        {"step": best.epoch, "game": game, "mode": cfg.mode, "summary": summary},
    )
    return summary


def train_trex(
    demos: EpisodeStore | str | Path,
    config: TrexConfig | None = None,
    *,
    resume: Path | None = None,
    progress: bool = True,
    **fields: Any,
) -> RewardModel:
    """Learn a reward from the demos of the store ``demos`` (T-REX, module docstring); returns it trained.

    ``config`` (default :class:`TrexConfig`: batched training) with ``fields`` replacing its fields
    (``num_demos=40, time_limit=30, run_root=out``), and ``demos`` its store; ``resume`` continues a stopped
    run. The result's ``summary`` is the run's summary row: the held-out-level correlations, the +1/step
    baseline and the length control, as ``trex train`` appends it to ``--summary``.
    """
    path = demos.path if isinstance(demos, EpisodeStore) else Path(demos)
    cfg = with_fields(config or TrexConfig(), **fields, demos=path)
    row = train_reward(cfg, progress, resume)
    return RewardModel.load(Path(row["run_dir"]) / "checkpoints" / "best", runtime=cfg.runtime())


def append_summary(path: Path, rows: list[dict]) -> None:
    """Append rows to a summary CSV, writing the header if the file is new."""
    with disk_errors(path, "T-REX summary"):
        path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    if not new:
        with disk_errors(path, "T-REX summary"), open(path, newline="") as f:
            header = next(csv.reader(f), [])
        if header != list(SUMMARY_COLUMNS):
            raise ProclabError(
                f"{str(path)!r} has other columns than this proclab writes (an older summary?); "
                "append to a new CSV"
            )
    with disk_errors(path, "T-REX summary"), open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(rows)
