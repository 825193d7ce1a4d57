"""Does the simulator hold up on held-out episodes? :func:`evaluate_world_model` (``proclab wm evaluate``).

On seeded windows of a held-out episode store (:mod:`.batch` alignment: simulated step ``k``
predicts ``obs[r0 + k]``; step 0 is the last frame the encoder saw), everything modal:

* **Frame error** at ``k = 1 .. horizon`` (MSE, pixels in [0, 1]) in three modes:
  ``teacher-forced`` (the posterior sees each true frame), ``open loop`` (the prior, driven by the
  recorded actions) and ``closed loop`` (the prior, the agent choosing its own actions: greedy, or
  sampled with ``--closed-loop sampled``, the default), beside three baselines that know no dynamics
  and see no frame after the last one the model saw: ``repeat last frame``, ``past mean frame`` (the
  mean of the episode's frames up to that one) and ``other episodes' mean frame`` (the mean of every
  other episode's frames); ``level mean frame (oracle)`` (the mean of every frame of that level in the store,
  which with about one episode per level holds the very frames it predicts) is reported apart, for
  scale, and never judged against; and ``real game (closed loop)``: the real
  game played again from each window's true state with the agent acting the same way
  (:mod:`.real_game`), the error an exact simulator would have, since the recorded future followed
  the recorded draws and the closed loop's actions differ from them. Each mean has a 95 % interval **clustered by episode** (:mod:`.clustered`), and each
  mode's *paired* difference to the better of the two baselines at that ``k`` has one too, and the
  closed loop's paired difference to the real game (how far the model is from an exact simulator);
  each mode's paired difference to ``repeat last frame`` alone is kept too. Beside the MSE, its
  **PSNR** (``10 log10(1 / MSE)`` per window, averaged), the field's usual number, and
  **controllability** (Genie's delta-PSNR): the open loop's PSNR with the recorded actions minus its
  PSNR with uniformly random ones (both from the same encoded start). Near 0, the model's frames do not
  follow the actions it is given, however low their error.
* **Changed-pixel error**: the same MSE over only the pixels where the true frame ``k`` differs
  from the true frame ``k - 1`` (by more than ``--change-threshold`` in some channel). Pixel MSE is
  dominated by the sky and the walls, which a blur gets right; in CoinRun the camera follows the
  agent, so whenever anything happens the edges of the coin, the saws, the crates and the agent
  itself are among the pixels that change, and a prediction that drops them pays there in full.
  It needs no game state, so it applies to every game and to any store.
* **Reward and done**: the dream's expected reward within ``N`` steps,
  ``sum_{k<=N} r_k prod_{j<k} (1 - p_done_j)``, scores "the agent collects a reward (in CoinRun:
  the coin) within ``N`` steps" against what really happened after the same start (AUC, with an
  episode-clustered bootstrap interval), and its expected return over the horizon is correlated with
  the real one (Pearson, Spearman). Beside it: the **no-dynamics baseline**, the AUC of the agent's
  own recorded value at the window start (what a dream must beat to show it simulates anything), and
  the **magnitude**: the mean expected reward the dream gives within ``N`` steps in windows that do
  collect one, against the real reward there. The teacher-forced AUC is also given on the windows with
  no episode end within ``N`` steps: where an episode ends, the step after its last action has no
  frame, and a model that read that padding would score there by reading the end, not the reward.
* **Agent-state drift** (:mod:`.state_drift`): the agent's states in closed loop (``closed loop``:
  started from the recorded state; ``dream``: from the state the converters predict, as ``wm
  sample`` and the dream analyses do) against real states of *other* held-out episodes, beside
  the real states at the same positions against the same reference.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data import default_collate

from proclab.envs import EnvConfig
from proclab.errors import ProclabError
from proclab.io.configs import from_dict
from proclab.io.files import save_figure, subplots, write_json
from proclab.io.progress import Phases, analysis_phases
from proclab.io.results import Result
from proclab.store import STATE_OUT, EpisodeStore
from proclab.store.schema import has_first_states
from proclab.worldmodel.batch import WindowBatch, make_batch
from proclab.worldmodel.checkpoint import TrainedWorldModel, as_trained
from proclab.worldmodel.clustered import clustered_auc, clustered_mean, correlations
from proclab.worldmodel.frame_error import (
    fair_mean_frames,
    frame_total,
    level_mean_frames,
    pick_windows,
    prediction_strip,
)
from proclab.worldmodel.model import Trajectory, WorldModel
from proclab.worldmodel.real_game import RealGame
from proclab.worldmodel.simulate import dreamed, imagined, teacher_forced
from proclab.worldmodel.state_drift import drift_summary, nearest_other_episode, reference_states

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MODES = ("teacher-forced", "open loop", "closed loop")
BASELINES = ("repeat last frame", "past mean frame", "other episodes' mean frame")
"""The baselines a mode is judged against: none sees a frame after the last one the model saw."""
ORACLE = "level mean frame (oracle)"
"""The mean of every frame of the window's level in the store, the predicted frames included: reported apart."""
RANDOM_ACTIONS = "open loop, random actions"
REAL_GAME = "real game (closed loop)"
ACTING = ("greedy", "sampled")
REWARD_MODES = ("teacher-forced", "open loop", "closed loop")
DRIFT_MODES = ("closed loop", "dream")


@dataclass(frozen=True, kw_only=True)
class EvaluationSettings:
    """What :func:`evaluate_world_model` measures, and on how much of the store."""

    horizon: int = 16
    """Simulated steps judged after the last frame the model saw (k = 1 .. horizon)."""
    windows: int = 2048
    """Start points (windows of the store, a seeded pick). The default reaches 500 or more levels in a store of
    600 one-episode levels (2,048 windows of the seed agent's 600 held-out episodes: 529 levels)."""
    within: int = 16
    """N of "collects a reward within N steps" (at most the horizon)."""
    change_threshold: float = 0.05
    """A pixel counts as changed when some channel moves by more than this between true frames k-1 and k."""
    reference_states: int = 20_000
    """Real agent states (a seeded subsample of the store's) that drift is measured against."""
    batch_size: int = 32
    """Windows simulated at once."""
    seed: int = 0
    """Seed of the window pick, the reference subsample, the strip's windows and the policy's draws in the
    sampled closed loop."""
    closed_loop: str = "sampled"
    """How the agent acts in closed loop, in the dream and in the real game: sampled (its policy, as it acted
    when the episodes were recorded: the default, since with greedy actions even the real game cannot beat
    the baselines at long horizons) or greedy (its modal action, as the dream analyses act)."""
    resamples: int = 1000
    """Episode-clustered bootstrap resamples of each AUC's interval."""
    real_game: bool = True
    """Also play the real game in the same closed loop from each window's true state: the error an exact
    simulator would have (needs the store's first game states and procgen)."""

    def check(self) -> None:
        for name in ("horizon", "windows", "within", "reference_states", "batch_size", "resamples"):
            if getattr(self, name) < 1:
                raise ProclabError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.within > self.horizon:
            raise ProclabError(f"--within ({self.within}) must be at most --horizon ({self.horizon})")
        if self.closed_loop not in ACTING:
            raise ProclabError(f"--closed-loop must be one of {', '.join(ACTING)}, got {self.closed_loop!r}")
        if not 0 <= self.change_threshold < 1:
            raise ProclabError(f"--change-threshold must be within [0, 1), got {self.change_threshold}")


@dataclass(frozen=True)
class WorldModelEvaluation(Result):
    """How a world model holds up on held-out episodes (the module docstring says what each part measures):
    ``mse`` and ``changed_pixels`` per step ``k`` and predictor (the three modes, the two baselines, the
    real game, the oracle), each with its episode-clustered interval and paired differences; ``psnr`` (per
    step and predictor, and the controllability); ``reward`` (AUCs with intervals, the no-dynamics
    baseline, the magnitude, return correlations); ``drift`` of the agent's dreamed states. ``wm evaluate`` writes
    :meth:`summary` as ``evaluation.json`` and :meth:`plot` as ``evaluation.png``."""

    checkpoint: str
    updates: int
    data: str
    horizon: int
    windows: int
    episodes: int
    levels: int
    seed: int
    change_threshold: float
    closed_loop: str
    real_game: str
    """``played``, ``not asked``, or why the real game could not be played."""
    mse: dict
    changed_pixels: dict
    psnr: dict
    closed_loop_same_actions: list | None
    """Per step, the share of windows whose dream agent has acted as in the real game so far."""
    reward: dict
    drift: dict | None

    def summary(self) -> dict:
        """``evaluation.json``: every field as computed (non-finite numbers kept, as the command always
        wrote them; :meth:`to_dict` writes them as null)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def table(self) -> list[dict]:
        """Per predictor and baseline, the frame MSE and changed-pixel MSE at the first, a middle and the
        last step judged (clustered means)."""
        steps = self.mse["steps"]
        shown = sorted({1, min(5, steps[-1]), steps[-1]})
        rows = []
        for name in self.mse["mean"]:
            row = {"frames": name}
            for metric, label in (("mse", "MSE"), ("changed_pixels", "changed-pixel MSE")):
                cells = getattr(self, metric)["mean"][name]
                row |= {f"{label} k={k}": cells[k - 1]["mean"] for k in shown}
            rows.append(row)
        return rows

    def plot(self, ax: Axes | None = None) -> Figure:
        """The two panels of ``evaluation.png`` (MSE and changed-pixel MSE against ``k``, 95 % bands)."""
        if ax is not None:
            raise ProclabError("WorldModelEvaluation.plot draws two panels of its own; call it without ax")
        return evaluation_figure(self.summary())


def _trajectories(
    wm: WorldModel, agent, batch: WindowBatch, greedy: bool, random_actions: torch.Tensor
) -> dict[str, Trajectory]:
    """Every mode's simulation of the batch's windows, all modal in the model's latents; ``random_actions``
    ``(S, B)`` drive the open loop whose frames controllability compares."""
    steps = batch.frames.shape[0]
    return {
        "teacher-forced": teacher_forced(wm, agent, batch, modal=True)[1],
        "open loop": imagined(wm, agent, batch, "true", modal=True),
        RANDOM_ACTIONS: imagined(wm, agent, batch, random_actions, modal=True),
        "closed loop": imagined(wm, agent, batch, "agent", modal=True, greedy=greedy),
        # as wm sample dreams: from the bottleneck alone, so that the vector describes the whole dream
        "dream": dreamed(wm, agent, wm.encode(batch.init_frames), steps, modal=True),
    }


def frame_rows(
    frames: dict[str, torch.Tensor], batch: WindowBatch, threshold: float
) -> dict[str, np.ndarray]:
    """Per window and step ``(B, S)``: the MSE of each set of frames, its PSNR (``10 log10(1 / MSE)``, pixels
    in [0, 1]; an exact frame counts as 100 dB), and the MSE over the pixels that changed between true
    frames ``k - 1`` and ``k`` (NaN past an episode's end, or where none changed)."""
    true = batch.frames.float() / 255
    prev = torch.cat([true[:1], true[:-1]])
    mask = batch.frame_mask.bool()
    changed = ((true - prev).abs().amax(2) > threshold) & mask[..., None, None]
    count = changed.sum((2, 3)).double()
    rows = {}
    for name, f in frames.items():
        sq = (f.float() - true).square().mean(2).double()
        mse = sq.mean((2, 3))
        rows[f"mse/{name}"] = torch.where(mask, mse, torch.nan).T.cpu().numpy()
        psnr = -10 * torch.log10(mse.clamp(min=1e-10))
        rows[f"psnr/{name}"] = torch.where(mask, psnr, torch.nan).T.cpu().numpy()
        moved = (sq * changed).sum((2, 3)) / count
        rows[f"changed/{name}"] = torch.where(count > 0, moved, torch.nan).T.cpu().numpy()
    return rows


def expected_returns(traj: Trajectory) -> np.ndarray:
    """``(B, S - 1)``: the dream's expected reward over steps ``1 .. k``, each step's reward weighted by the
    predicted chance that no earlier step ended the episode."""
    reward = traj.reward[1:].double()
    alive = torch.cumprod(1 - torch.sigmoid(traj.done_logit[1:].double()), 0)
    before = torch.cat([torch.ones_like(alive[:1]), alive[:-1]])
    return torch.cumsum(reward * before, 0).T.cpu().numpy()


def _batch_rows(
    wm,
    agent,
    batch: WindowBatch,
    means: dict[str, torch.Tensor],
    random_actions: torch.Tensor,
    real: torch.Tensor | None,
    args: EvaluationSettings,
) -> dict:
    """Everything the evaluation keeps of one batch, per window (first axis); ``means``: the fair mean
    frames and the oracle's ``(B, 3, 64, 64)``; ``random_actions``: the controllability's ``(S, B)``;
    ``real``: the real game's frames in the same closed loop (uint8), or None."""
    trajs = _trajectories(wm, agent, batch, args.closed_loop == "greedy", random_actions)
    true = batch.frames.float() / 255
    frames = {name: trajs[name].frame for name in (*MODES, RANDOM_ACTIONS)}
    frames["repeat last frame"] = true[:1].expand_as(true)
    for name, mean in means.items():
        frames[name] = mean.unsqueeze(0).expand_as(true)
    if real is not None:
        frames[REAL_GAME] = real.to(true.device).float() / 255
    rows = frame_rows(frames, batch, args.change_threshold)
    rows["action/closed loop"] = trajs["closed loop"].action.argmax(-1).T.cpu().numpy()
    rows["frame_mask"] = batch.frame_mask.bool().T.cpu().numpy()
    real = (batch.reward * batch.prev_mask)[1:].double()
    rows["return/real"] = torch.cumsum(real, 0).T.cpu().numpy()
    for name in REWARD_MODES:
        rows[f"return/{name}"] = expected_returns(trajs[name])
    rows["reward/no end within"] = batch.frame_mask[args.within].bool().cpu().numpy()
    if batch.value is not None:
        rows["reward/value at start"] = batch.value[0].double().cpu().numpy()
    rows["state/real"] = batch.agent_states.float().transpose(0, 1).cpu().numpy()
    rows["state/mask"] = batch.state_mask.bool().T.cpu().numpy()
    for name in DRIFT_MODES:
        rows[f"state/{name}"] = trajs[name].agent_state.float().transpose(0, 1).cpu().numpy()
    return rows


@torch.no_grad()
def collect(
    wm: WorldModel,
    agent,
    store: EpisodeStore,
    reward_field: str,
    runtime,
    args: EvaluationSettings,
    ph: Phases,
    env_config: EnvConfig | None = None,
) -> dict:
    """Per-window arrays of every quantity (:func:`_batch_rows`) plus each window's ``episode`` and ``level``;
    with ``env_config`` (the agent's environment) the real game's closed loop too; the share of windows
    simulated shown on ``ph``."""
    config, dataset, picks = pick_windows(wm, store, reward_field, args.horizon, args.windows, args.seed)
    means, total = level_mean_frames(store), frame_total(store)
    game = RealGame(store, env_config, args.seed) if env_config is not None else None
    draws = torch.Generator().manual_seed(args.seed)
    random_draws = torch.Generator().manual_seed(args.seed + 1)
    levels = store.episodes["level_seed"]
    parts: dict[str, list[np.ndarray]] = {}
    wm.eval()
    chunks = np.array_split(picks, max(1, -(-len(picks) // args.batch_size)))
    # the sampled closed loop draws the agent's actions from torch's generator: seeded, and given back after
    count = ph.counter(len(picks))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(args.seed)
        for chunk in chunks:
            items = default_collate([dataset[int(i)] for i in chunk])
            batch = make_batch(items, config, wm.codec, reward_field).to(runtime.device)
            episodes = items["episode"].numpy()
            last = items["offset"].numpy() + config.num_init_steps - 1
            known = fair_mean_frames(store, episodes, last, total)
            known[ORACLE] = np.stack([means[int(levels[e])] for e in episodes])
            known = {name: torch.from_numpy(m).to(runtime.device) for name, m in known.items()}
            # a_{-1} made the frame the model saw last: kept; every later action drawn uniformly
            random_actions = batch.prev_actions.clone()
            random_actions[1:] = torch.randint(
                0, wm.num_actions, random_actions[1:].shape, generator=random_draws
            ).to(random_actions.device)
            real = real_actions = None
            with runtime.autocast():
                if game is not None:
                    steps = dataset.offsets[chunk] + config.num_init_steps - 1
                    states = [game.state_at(int(e), int(t)) for e, t in zip(episodes, steps, strict=True)]
                    start = wm.codec.unflatten(batch.agent_h0.to(runtime.device))
                    real, real_actions = game.play(agent, states, start, args.horizon, greedy=args.closed_loop == "greedy",
                                     generator=draws)  # fmt: skip
                rows = _batch_rows(wm, agent, batch, known, random_actions, real, args)
                dreamt = rows.pop("action/closed loop")[:, : args.horizon]
                if real_actions is not None:
                    rows["same_actions"] = same_so_far(dreamt, real_actions.T.numpy(), rows["frame_mask"])
            rows |= {"episode": episodes, "level": levels[episodes]}
            for k, v in rows.items():
                parts.setdefault(k, []).append(v)
            count(len(chunk))
    return {k: np.concatenate(v) for k, v in parts.items()}


def frame_table(rows: dict, episodes: np.ndarray, metric: str) -> dict:
    """Per step ``1 .. H``: every mode's and baseline's (and the oracle's, and the real game's) clustered mean,
    each mode's (and the real game's: where an exact simulator could pass at all) paired difference to the
    better baseline (lower mean; never the oracle) at that step and to repeating the last frame, and the
    closed loop's to the real game."""
    extra = tuple(name for name in (ORACLE, REAL_GAME) if f"{metric}/{name}" in rows)
    names = MODES + BASELINES + extra
    horizon = rows[f"{metric}/{names[0]}"].shape[1] - 1
    table: dict = {name: [] for name in names}
    judged = MODES + ((REAL_GAME,) if REAL_GAME in names else ())
    paired: dict = {name: [] for name in judged}
    to_repeat: dict = {name: [] for name in judged}
    from_real = [] if REAL_GAME in names else None
    for k in range(1, horizon + 1):
        at = {name: rows[f"{metric}/{name}"][:, k] for name in names}
        for name in names:
            table[name].append(clustered_mean(at[name], episodes))
        if from_real is not None:
            from_real.append(clustered_mean(at["closed loop"] - at[REAL_GAME], episodes))
        for name in judged:
            to_repeat[name].append(clustered_mean(at[name] - at["repeat last frame"], episodes))
        means = {b: table[b][-1]["mean"] for b in BASELINES}
        known = [b for b in BASELINES if means[b] is not None]
        if not known:
            for name in judged:
                paired[name].append(None)
            continue
        best = min(known, key=means.__getitem__)
        for name in judged:
            paired[name].append({"baseline": best, **clustered_mean(at[name] - at[best], episodes)})
    return {
        "steps": list(range(1, horizon + 1)),
        "mean": table,
        "minus_better_baseline": paired,
        "minus_repeat_last_frame": to_repeat,
        "closed_loop_minus_real_game": from_real,
    }


def psnr_table(rows: dict, episodes: np.ndarray) -> dict:
    """Per step ``1 .. H``: each predictor's clustered mean PSNR, and the controllability: the clustered mean
    of each window's open-loop PSNR with the recorded actions minus its PSNR with random ones."""
    names = [key.split("/", 1)[1] for key in rows if key.startswith("psnr/")]
    horizon = rows[f"psnr/{names[0]}"].shape[1] - 1
    steps = range(1, horizon + 1)
    control = rows["psnr/open loop"] - rows[f"psnr/{RANDOM_ACTIONS}"]
    return {
        "steps": list(steps),
        "mean": {
            name: [clustered_mean(rows[f"psnr/{name}"][:, k], episodes) for k in steps] for name in names
        },
        "controllability": [clustered_mean(control[:, k], episodes) for k in steps],
    }


def same_so_far(dreamt: np.ndarray, real: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``(B, H)``: 1 where the dream's agent has taken the real game's action at every step ``0 .. k`` (the two
    loops still one), 0 once they parted, NaN where the recorded frame ``k + 1`` is past the episode's end."""
    same = np.cumprod(dreamt == real, axis=1).astype(np.float64)
    return np.where(mask[:, 1 : real.shape[1] + 1], same, np.nan)


def actions_table(rows: dict, episodes: np.ndarray) -> list[dict] | None:
    """Per step ``k = 0 .. H - 1``: the clustered share of windows whose dream agent has acted as in the real
    game at every step up to ``k`` (meaningful in the greedy loop, where both are deterministic)."""
    if "same_actions" not in rows:
        return None
    same = rows["same_actions"]
    return [clustered_mean(same[:, k], episodes) for k in range(same.shape[1])]


def reward_table(rows: dict, within: int, resamples: int = 1000, seed: int = 0) -> dict:
    """Per mode: the AUC of "a reward within ``within`` steps" with its episode-clustered interval, the mean
    expected reward within ``within`` steps in windows with and without one (clustered), and the
    correlation of the horizon's returns; the no-dynamics baseline (the recorded value at the window start);
    the teacher-forced AUC on windows whose episode does not end within ``within`` steps."""
    real = rows["return/real"]
    episodes = rows["episode"]
    label = real[:, within - 1] > 0
    out = {
        "within": within,
        "windows": len(label),
        "positives": int(label.sum()),
        "real_reward_in_positives": clustered_mean(np.where(label, real[:, within - 1], np.nan), episodes),
    }
    for name in REWARD_MODES:
        dream = rows[f"return/{name}"]
        scores = dream[:, within - 1]
        out[name] = {
            **clustered_auc(scores, label, episodes, resamples, seed),
            "mean_in_positives": clustered_mean(np.where(label, scores, np.nan), episodes),
            "mean_in_negatives": clustered_mean(np.where(label, np.nan, scores), episodes),
            "return_correlation": correlations(dream[:, -1], real[:, -1]),
        }
    value = rows.get("reward/value at start")
    out["value at start"] = None if value is None else clustered_auc(value, label, episodes, resamples, seed)
    keep = rows["reward/no end within"]
    out["teacher-forced, no end within"] = clustered_auc(
        rows["return/teacher-forced"][keep, within - 1], label[keep], episodes[keep], resamples, seed
    )
    return out


def drift_table(rows: dict, store: EpisodeStore, wm: WorldModel, args: EvaluationSettings) -> dict | None:
    """Each drift mode's nearest-other-episode distances against the real states' (:mod:`.state_drift`);
    None for a stateless agent or a store of one episode."""
    names = wm.codec.store_fields(STATE_OUT)
    if not names or store.num_episodes < 2:
        return None
    states = []
    for e in range(store.num_episodes):
        data = store.read(e, names)
        states.append(
            np.concatenate([np.asarray(data[n], np.float32).reshape(len(data[n]), -1) for n in names], -1)
        )
    ref, ref_episode = reference_states(states, args.reference_states, args.seed)
    mask = rows["state/mask"]
    episode = np.broadcast_to(rows["episode"][:, None], mask.shape)[mask]
    step = np.broadcast_to(np.arange(mask.shape[1]), mask.shape)[mask]
    real = nearest_other_episode(ref, ref_episode, rows["state/real"][mask], episode)
    out: dict[str, Any] = {"reference_states": len(ref)}
    for name in DRIFT_MODES:
        dreamed_d = nearest_other_episode(ref, ref_episode, rows[f"state/{name}"][mask], episode)
        out[name] = drift_summary(dreamed_d, real, step)
    return out


def evaluation_figure(result: dict):
    """Two panels (MSE, changed-pixel MSE) against k: each mode and baseline with its clustered 95 % band."""
    fig, axes = subplots(1, 2, figsize=(11, 3.8))
    for ax, (metric, title) in zip(
        axes, (("mse", "frame MSE"), ("changed_pixels", "changed-pixel MSE")), strict=True
    ):
        table = result[metric]
        for name, cells in table["mean"].items():
            ys = [np.nan if c["mean"] is None else c["mean"] for c in cells]
            bands = np.array([(np.nan, np.nan) if c["ci95"] is None else c["ci95"] for c in cells], float)
            style = (
                "--" if name in BASELINES else "-." if name == ORACLE else ":" if name == REAL_GAME else "-"
            )
            (line,) = ax.plot(table["steps"], ys, style, marker="o", ms=3, label=name)
            ax.fill_between(table["steps"], bands[:, 0], bands[:, 1], color=line.get_color(), alpha=0.2, lw=0)
        ax.set_xlabel("k (frames after the last one the model saw)")
        ax.set_ylabel(f"{title} (pixels in [0, 1])")
        ax.set_title(f"{title}, 95 % intervals clustered by episode")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(
        f"{result['windows']} windows of {result['episodes']} held-out episodes ({result['levels']} levels)"
    )
    fig.tight_layout()
    return fig


def plot_evaluation(result: dict, path: Path) -> Path:
    """:func:`evaluation_figure` written to ``path``."""
    return save_figure(evaluation_figure(result), path, dpi=110)


def evaluate_world_model(
    world_model: TrainedWorldModel | str | Path,
    *,
    data: EpisodeStore | str | Path,
    settings: EvaluationSettings = EvaluationSettings(),
    progress: bool = True,
) -> WorldModelEvaluation:
    """Judge ``world_model`` on the held-out episodes of the store ``data`` (module docstring): ``settings`` say
    what is measured on how many windows; the numbers are those ``proclab wm evaluate`` writes for the same
    settings. ``progress``: show the share of windows simulated."""
    world = as_trained(world_model)
    settings.check()
    store = data if isinstance(data, EpisodeStore) else EpisodeStore(data)
    agent, ckpt = world.agent, world.checkpoint
    store.check_agent(agent.config.num_actions, agent.state_shapes())
    replayable = settings.real_game and has_first_states(store)
    env_config = from_dict(EnvConfig, ckpt.meta["agent_env"]) if replayable else None
    with analysis_phases(progress, 1, "wm evaluate") as ph, ph.phase("simulating windows"):
        rows = collect(world.model, agent, store, world.reward_field, world.runtime, settings, ph, env_config)
    episodes = rows["episode"]
    return WorldModelEvaluation(
        checkpoint=str(ckpt.path),
        updates=ckpt.step,
        data=str(data.path if isinstance(data, EpisodeStore) else data),
        horizon=settings.horizon,
        windows=len(episodes),
        episodes=len(np.unique(episodes)),
        levels=len(np.unique(rows["level"])),
        seed=settings.seed,
        change_threshold=settings.change_threshold,
        closed_loop=settings.closed_loop,
        real_game="played"
        if replayable
        else "not asked"
        if not settings.real_game
        else "the store holds no first game states",
        mse=frame_table(rows, episodes, "mse"),
        changed_pixels=frame_table(rows, episodes, "changed"),
        psnr=psnr_table(rows, episodes),
        closed_loop_same_actions=actions_table(rows, episodes),
        reward=reward_table(rows, settings.within, settings.resamples, settings.seed),
        drift=drift_table(rows, store, world.model, settings),
    )


@dataclass(frozen=True)
class StripSettings:
    """The prediction strip of :func:`evaluate_into`: ``windows`` windows (a seeded pick) as rows of true |
    teacher-forced | imagined (open loop) | closed-loop (greedy) frames; with ``near``, only windows with that
    kind (coinrun: saw, coin, crate, enemy, lava) within ``near_radius`` world units of the agent at their start
    (read from the replayed game state: the store needs its first game states)."""

    windows: int
    near: str | None = None
    near_radius: float = 3.0


def evaluate_into(
    out: Path,
    world: TrainedWorldModel,
    data: Path,
    settings: EvaluationSettings,
    *,
    strip: StripSettings | None = None,
    progress: bool = True,
) -> dict:
    """:func:`evaluate_world_model` of ``world`` on the store ``data``, written as ``out/evaluation.json`` (its
    summary) and ``out/evaluation.png`` (its plot), and with ``strip``, ``out/strip.png``; returns the summary."""
    result = evaluate_world_model(world, data=data, settings=settings, progress=progress).summary()
    write_json(out / "evaluation.json", result, "world-model evaluation", indent=1)
    plot_evaluation(result, out / "evaluation.png")
    if strip is not None:
        near = None if strip.near is None else (strip.near, strip.near_radius)
        prediction_strip(
            world.model,
            world.agent,
            EpisodeStore(data),
            world.reward_field,
            world.runtime,
            out / "strip.png",
            steps=settings.horizon,
            windows=strip.windows,
            seed=settings.seed,
            near=near,
            env_config=from_dict(EnvConfig, world.checkpoint.meta["agent_env"]),
        )
    return result
