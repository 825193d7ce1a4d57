"""How well the simulator predicts frames, step by step, against two baselines that know no dynamics: the
functions of the quickstart's dream-quality stage, and the prediction strip of ``proclab wm evaluate``.

A blurred dream can still have a low loss; what a user needs to know is whether the model
predicts the *next* frames better than something trivial. On windows of an episode store
(:mod:`.batch` alignment: step ``k`` predicts frame ``obs[r0 + k]``, step 0 is the last frame
the encoder saw), the mean squared pixel error (frames in [0, 1]) per simulated step of:

* ``teacher-forced``: the posterior reconstruction (the model sees each true frame; modal);
* ``imagined``: the prior alone from the encoded initial frames, driven by the recorded actions;
* ``closed loop``: the prior alone with the agent choosing its own actions (greedy), the way
  ``wm sample`` dreams; it drifts from the data also where the agent acts differently;
* ``repeat last frame``: the last initial frame, repeated (exact at step 0, hence steps ``>= 1``);
* ``past mean frame``: the mean of the episode's frames from its first up to the last one the model saw,
  and ``other episodes' mean frame``: the mean of every other episode's frames (:func:`fair_mean_frames`):
  mean frames that, like the model, know nothing of the episode's future;
* ``level mean frame``: the mean of every frame of the window's level in the store. With about one
  episode per level this mean contains the very frames it is asked to predict: an **oracle**, shown
  for scale, never the bar a model is judged against.

Only real rows count (``frame_mask``: none past an episode's end). Everything is modal, so the
numbers depend only on the windows picked (``seed``). Each mean comes with a 95 % interval over
windows (normal approximation: a mean of hundreds of windows), and each predictor's difference to
``repeat last frame`` with a *paired* one (the same windows), since "beats the trivial baseline"
is the claim a reader checks and window-to-window variation mostly cancels in it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw
from torch import Tensor
from torch.utils.data import default_collate

from proclab.envs import EnvConfig
from proclab.envs.state import glossary
from proclab.errors import ProclabError
from proclab.io.files import save_figure, subplots
from proclab.record.ground_truth import kind_gaps
from proclab.store import EpisodeStore
from proclab.worldmodel.batch import WindowBatch, make_batch, window_dataset
from proclab.worldmodel.model import WorldModel
from proclab.worldmodel.real_game import RealGame
from proclab.worldmodel.simulate import imagined, teacher_forced

PREDICTORS = ("teacher-forced", "imagined", "closed loop")
BASELINES = ("repeat last frame", "past mean frame", "other episodes' mean frame", "level mean frame")


def level_mean_frames(store: EpisodeStore) -> dict[int, np.ndarray]:
    """``level_seed -> (3, 64, 64)`` float32 mean frame in [0, 1] over all that level's rows."""
    sums: dict[int, np.ndarray] = {}
    counts: dict[int, int] = {}
    for e, level in enumerate(store.episodes["level_seed"]):
        obs = store.read(e, ["obs"])["obs"]
        level = int(level)
        sums[level] = sums.get(level, 0) + obs.astype(np.float64).sum(0)
        counts[level] = counts.get(level, 0) + len(obs)
    return {level: (sums[level] / counts[level] / 255).astype(np.float32) for level in sums}


def frame_total(store: EpisodeStore) -> tuple[np.ndarray, int]:
    """The sum ``(3, 64, 64)`` (float64, pixels 0..255) and count of every frame of the store."""
    total, count = np.zeros((3, 64, 64)), 0
    for e in range(store.num_episodes):
        obs = store.read(e, ["obs"])["obs"]
        total += obs.sum(0, dtype=np.float64)
        count += len(obs)
    return total, count


def fair_mean_frames(
    store: EpisodeStore, episodes: np.ndarray, last_rows: np.ndarray, total: tuple[np.ndarray, int]
) -> dict[str, np.ndarray]:
    """Per window, two mean frames ``(B, 3, 64, 64)`` (float32 in [0, 1]) that see none of the frames they are
    asked to predict, unlike the level's mean over the whole store (an oracle where a level has one episode):

    * ``past mean frame``: the mean of the window's episode's frames ``0 .. last_row`` (the last frame the
      model saw): the level as far as the model has seen it;
    * ``other episodes' mean frame``: the mean of every frame of every *other* episode of the store
      (``total``: :func:`frame_total`): the game's look, none of this episode's future. At long horizons it
      is the stronger of the two.

    Each episode is read once per call, and only its sums are kept."""
    episodes, last_rows = np.asarray(episodes), np.asarray(last_rows)
    past = np.empty((len(episodes), 3, 64, 64), np.float32)
    others = np.empty_like(past)
    for e in np.unique(episodes).tolist():
        obs = store.read(e, ["obs"])["obs"]
        other = (total[0] - obs.sum(0, dtype=np.float64)) / (total[1] - len(obs)) / 255
        for i in np.flatnonzero(episodes == e):
            past[i] = obs[: last_rows[i] + 1].sum(0, dtype=np.float64) / (last_rows[i] + 1) / 255
            others[i] = other
    return {"past mean frame": past, "other episodes' mean frame": others}


def pick_windows(wm: WorldModel, store: EpisodeStore, reward_field: str, steps: int, windows: int, seed: int):
    """The window config (``steps + 1`` simulated steps), the store's windows and a seeded sorted pick of them."""
    config = replace(wm.config, num_sim_steps=steps + 1)
    dataset = window_dataset(store, config, wm.codec, reward_field)
    picks = np.random.default_rng(seed).choice(len(dataset), min(windows, len(dataset)), replace=False)
    return config, dataset, np.sort(picks)


def _predicted(wm: WorldModel, agent, batch: WindowBatch) -> dict[str, Tensor]:
    """Each predictor's ``(S, B, 3, 64, 64)`` frames in [0, 1], all modal."""
    return {
        "teacher-forced": teacher_forced(wm, agent, batch, modal=True)[1].frame,
        "imagined": imagined(wm, agent, batch, "true", modal=True).frame,
        "closed loop": imagined(wm, agent, batch, "agent", modal=True).frame,
    }


@torch.no_grad()
def frame_errors(
    wm: WorldModel,
    agent,
    store: EpisodeStore,
    reward_field: str,
    runtime,
    *,
    steps: int = 5,
    windows: int = 64,
    batch_size: int = 16,
    seed: int = 0,
) -> dict:
    """Mean squared frame error per step ``1..steps`` of each predictor and baseline (module docstring).

    Returns ``{"steps": [1..steps], "windows": n, "mse": {name: [per step]}, "ci95": {name: [[lo, hi]
    per step]}, "minus_repeat_last": {predictor: [{"mean", "ci95"} per step]}}``; a step no window
    reaches (all episodes ended) is ``None``.
    """
    config, dataset, picks = pick_windows(wm, store, reward_field, steps, windows, seed)
    means, total = level_mean_frames(store), frame_total(store)
    levels = store.episodes["level_seed"]
    errors: dict[str, list[Tensor]] = {name: [] for name in PREDICTORS + BASELINES}
    masks = []
    for chunk in np.array_split(picks, max(1, -(-len(picks) // batch_size))):
        items = default_collate([dataset[int(i)] for i in chunk])
        batch = make_batch(items, config, wm.codec, reward_field).to(runtime.device)
        level_mean = torch.from_numpy(np.stack([means[int(levels[int(e)])] for e in items["episode"]]))
        last = items["offset"].numpy() + config.num_init_steps - 1
        fair = fair_mean_frames(store, items["episode"].numpy(), last, total)
        true = batch.frames.float() / 255
        mask = batch.frame_mask.double().cpu()
        with runtime.autocast():
            predicted = _predicted(wm, agent, batch)
        predicted["repeat last frame"] = true[:1].expand_as(true)
        for name, mean in fair.items():
            predicted[name] = torch.from_numpy(mean).to(runtime.device).unsqueeze(0).expand_as(true)
        predicted["level mean frame"] = level_mean.to(runtime.device).unsqueeze(0).expand_as(true)
        for name, frames in predicted.items():
            errors[name].append((frames.float() - true).square().mean((2, 3, 4)).double().cpu())
        masks.append(mask)
    mask = torch.cat(masks, 1)[1:].bool().numpy()  # (steps, windows); step 0 was seen
    err = {name: torch.cat(e, 1)[1:].numpy() for name, e in errors.items()}
    stats = {name: _per_step(e, mask) for name, e in err.items()}
    paired = {name: _per_step(err[name] - err["repeat last frame"], mask) for name in PREDICTORS}
    return {
        "steps": list(range(1, steps + 1)),
        "windows": len(picks),
        "mse": {name: [mean for mean, _ in per_step] for name, per_step in stats.items()},
        "ci95": {name: [ci for _, ci in per_step] for name, per_step in stats.items()},
        "minus_repeat_last": {
            name: [{"mean": mean, "ci95": ci} for mean, ci in per_step] for name, per_step in paired.items()
        },
    }


def _per_step(err: np.ndarray, mask: np.ndarray) -> list[tuple[float | None, list[float] | None]]:
    """:func:`_mean` of each step's row of ``err`` (steps, windows) over the windows that reach it."""
    return [_mean(row[m]) for row, m in zip(err, mask, strict=True)]


def _mean(x: np.ndarray) -> tuple[float | None, list[float] | None]:
    """The mean of ``x`` and its 95 % normal interval (``None`` where ``x`` is empty; no interval of one)."""
    if len(x) == 0:
        return None, None
    mean = float(x.mean())
    if len(x) == 1:
        return mean, None
    half = 1.96 * float(x.std(ddof=1)) / np.sqrt(len(x))
    return mean, [mean - half, mean + half]


def plot_frame_errors(result: dict, path: Path) -> Path:
    """One line per predictor and baseline, with its 95 % band: the frame error against the simulated step."""
    fig, ax = subplots(figsize=(6, 3.6))
    for name, values in result["mse"].items():
        style = "--" if name in BASELINES else "-"
        ys = [np.nan if v is None else v for v in values]
        (line,) = ax.plot(result["steps"], ys, style, marker="o", label=name)
        bands = [(np.nan, np.nan) if ci is None else ci for ci in result["ci95"][name]]
        ax.fill_between(result["steps"], *np.transpose(bands), color=line.get_color(), alpha=0.2, lw=0)
    ax.set_xlabel("simulated step (frames after the last one the model saw)")
    ax.set_ylabel("frame MSE (pixels in [0, 1])")
    ax.set_title(f"dream quality on {result['windows']} held-out windows")
    ax.set_xticks(result["steps"])
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)


@torch.no_grad()
def prediction_strip(
    wm: WorldModel,
    agent,
    store: EpisodeStore,
    reward_field: str,
    runtime,
    path: Path,
    *,
    steps: int = 5,
    windows: int = 2,
    seed: int = 0,
    near: tuple[str, float] | None = None,
    env_config: EnvConfig | None = None,
) -> Path:
    """A PNG: for ``windows`` windows, rows true | teacher-forced | imagined | closed loop, steps 0..``steps``;
    with ``near`` (a kind and a radius) only windows with that kind near the agent at step 0
    (:func:`windows_near`, in the real game of ``env_config``)."""
    config, dataset, picks = pick_windows(wm, store, reward_field, steps, windows, seed)
    if near is not None:
        order = np.random.default_rng(seed).permutation(len(dataset))
        picks = windows_near(store, dataset, config, env_config, order, *near, windows)
    items = default_collate([dataset[int(i)] for i in picks])
    batch = make_batch(items, config, wm.codec, reward_field).to(runtime.device)
    with runtime.autocast():
        predicted = _predicted(wm, agent, batch)
    true = batch.frames.float() / 255
    rows = [true] + [predicted[name] for name in PREDICTORS]
    mask = batch.frame_mask[..., None, None, None]
    grid = torch.stack(
        [torch.where(mask, r.float(), 0) for r in rows]
    )  # (rows, S, B, 3, H, W), black past the end
    grid = grid.permute(2, 0, 3, 4, 1, 5)  # (B, rows, 3, H, S, W)
    B, R, C, H, S, W = grid.shape
    image = grid.reshape(B * R, C, H, S * W).permute(0, 2, 3, 1).reshape(B * R * H, S * W, C)
    pixels = image.clamp(0, 1).mul(255).round().to(torch.uint8).cpu().numpy()
    frames = Image.fromarray(pixels).resize((S * W * 2, B * R * H * 2), Image.NEAREST)
    canvas = Image.new("RGB", (frames.width + 120, frames.height), "white")
    canvas.paste(frames, (120, 0))
    draw = ImageDraw.Draw(canvas)
    for i, label in enumerate(["true", *PREDICTORS] * B):
        draw.text((6, i * H * 2 + H - 6), label, fill="black")
    canvas.save(path)
    return path


def windows_near(
    store: EpisodeStore,
    dataset,
    config,
    env_config: EnvConfig,
    order: np.ndarray,
    kind: str,
    radius: float,
    count: int,
    scanned: int = 4000,
) -> np.ndarray:
    """The first ``count`` windows of ``order`` (at most ``scanned`` looked at) whose step 0 has a ``kind``
    (a kind of the game's glossary, or a hazard such as coinrun's ``saw``, which names its looks) within
    ``radius`` world units of the agent: read from the game state, rebuilt by replaying the episode
    (:class:`~proclab.worldmodel.real_game.RealGame`). Rare objects are then drawn on purpose, not by luck."""
    names = glossary(env_config.games()[0])
    members = names.hazards.get(kind, (kind,))
    types = np.array([names.type_of(k) for k in members], np.int64)
    is_cell = np.array([names.is_cell(k) for k in members], bool)
    game = RealGame(store, env_config)
    found = []
    for k in order[:scanned]:
        e, step = int(dataset.episode_ids[k]), int(dataset.offsets[k]) + config.num_init_steps - 1
        if kind_gaps(game.state_at(e, step), types, is_cell).min() <= radius:
            found.append(int(k))
            if len(found) == count:
                break
    if not found:
        raise ProclabError(
            f"no window of the {min(len(order), scanned)} looked at has a {kind} within {radius} of the agent"
        )
    return np.sort(np.array(found))
