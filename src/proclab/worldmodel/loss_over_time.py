"""How fast simulation drifts from the data, step by step (``proclab wm loss-over-time``).

For ``--batches`` batches of windows of an episode store, the model encodes the initial frames
and *imagines* (prior samples, no true frames after the initial ones) while the recorded agent
state starts the agent, as the seed's ``loss_over_time_experiment``. The environment is driven
by the recorded actions (``--actions true``, the seed's setting) or by the agent's own
(``--actions agent``: fully closed loop from the recorded previous action). At every
simulation step each predicted quantity is compared with the data, masked as in training
(:mod:`.losses`): image, reward, done, agent state, KL(posterior || prior) (the posterior
sees the true frame, only to measure), env update, and the agent's value error, policy KL and
action mismatch.

Each batch gives one mean per step and quantity; the JSON holds, per quantity and step, the
mean over batches and its min-max band, and the plot draws them. (The seed's plot drew its
band as mean - min to mean + max, far wider than the data; here the band is [min, max].)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import default_collate

from proclab.errors import ProclabError, unknown_choice
from proclab.io.files import save_figure, subplots, write_json
from proclab.io.progress import progress_bar
from proclab.run.runtime import RuntimeConfig
from proclab.store import EpisodeStore
from proclab.worldmodel.batch import make_batch, window_dataset
from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.losses import TERM_MASKS, eval_terms, masked
from proclab.worldmodel.simulate import ACTION_SOURCES, imagined


@dataclass(frozen=True)
class LossOverTimeSettings:
    """What :func:`loss_over_time` compares (``proclab wm loss-over-time``'s options of these names)."""

    batches: int = 16  # batches of windows (the seed: 16)
    batch_size: int = 32  # windows per batch
    steps: int | None = None  # simulated steps (None: the model's num_sim_steps)
    actions: str = "true"  # what drives the environment: true (the recorded actions) or agent (closed loop)
    modal: bool = True  # take the argmax of each categorical (False samples the prior)
    seed: int = 0  # seed of the windows' choice and of the samples


def loss_over_time(
    wm_path: Path,
    out: Path,
    settings: LossOverTimeSettings,
    runtime: RuntimeConfig,
    *,
    data: Path | None = None,
    progress: bool = True,
) -> dict:
    """The per-step errors of the world model ``wm_path`` (a run or checkpoint directory) on ``runtime`` against
    the store ``data`` (default: the one the model was trained on); writes ``out/loss_over_time.json`` and
    ``.png``, returns the JSON data."""
    if settings.actions not in ACTION_SOURCES:
        raise unknown_choice("action source", settings.actions, ACTION_SOURCES)
    if settings.batches < 1 or settings.batch_size < 1 or (settings.steps is not None and settings.steps < 1):
        raise ProclabError("--batches, --batch-size and --steps must be >= 1")
    rt = runtime.runtime()
    wm, agent, ckpt = load_world_model(wm_path, rt)
    wm.eval()
    config = replace(wm.config, num_sim_steps=settings.steps or wm.config.num_sim_steps)
    data = data or Path(ckpt.meta["data"])
    store = EpisodeStore(data)
    store.check_agent(agent.config.num_actions, agent.state_shapes())
    reward_field = ckpt.meta["reward_field"]
    windows = window_dataset(store, config, wm.codec, reward_field)
    rng = np.random.default_rng(settings.seed)
    total = settings.batches * settings.batch_size
    picks = rng.choice(len(windows), total, replace=total > len(windows))
    torch.manual_seed(settings.seed)
    per_batch: dict[str, list[np.ndarray]] = {}
    with progress_bar(transient=True, disable=not progress) as bar, torch.no_grad():
        task = bar.add_task("loss over time", total=settings.batches)
        for chunk in np.split(picks, settings.batches):
            items = default_collate([windows[int(i)] for i in chunk])
            batch = make_batch(items, config, wm.codec, reward_field).to(rt.device)
            with rt.autocast():
                traj = imagined(wm, agent, batch, settings.actions, settings.modal)
            terms = eval_terms(traj, batch)
            if not wm.codec.width:
                terms.pop("agent_state")
            for name, value in masked(terms, batch).items():
                count = getattr(batch, TERM_MASKS[name]).sum(1)
                mean = torch.where(count > 0, value.sum(1) / count.clamp(min=1), math.nan)
                per_batch.setdefault(name, []).append(mean.float().cpu().numpy())
            bar.advance(task)
    result = {
        "checkpoint": str(ckpt.path),
        "data": str(data),
        "steps": config.num_sim_steps,
        "actions": settings.actions,
        "modal": settings.modal,
        "batches": settings.batches,
        "batch_size": settings.batch_size,
        "seed": settings.seed,
        "quantities": {name: summarise(np.stack(rows)) for name, rows in per_batch.items()},
    }
    write_json(out / "loss_over_time.json", result, "loss over time", indent=1)
    plot_loss_over_time(result, out / "loss_over_time.png")
    return result


def summarise(per_batch: np.ndarray) -> dict[str, list]:
    """``(batches, steps)`` batch means (NaN: no data in that batch and step) -> mean, min, max per step."""
    has = ~np.isnan(per_batch)
    n = has.sum(0)
    filled_lo, filled_hi = np.where(has, per_batch, np.inf), np.where(has, per_batch, -np.inf)
    mean = np.where(n > 0, np.where(has, per_batch, 0).sum(0) / np.maximum(n, 1), np.nan)

    def listed(a):
        return [None if not np.isfinite(x) else float(x) for x in a]

    return {
        "mean": listed(mean),
        "min": listed(filled_lo.min(0)),
        "max": listed(filled_hi.max(0)),
        "batches": n.tolist(),
    }


def plot_loss_over_time(result: dict, path: Path) -> Path:
    """One panel per quantity: the mean over batches and the [min, max] band, against the simulation step."""
    names = list(result["quantities"])
    cols = 3
    rows = math.ceil(len(names) / cols)
    fig, axes = subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        q = result["quantities"][name]
        x = np.arange(len(q["mean"]))
        as_array = {
            k: np.array([np.nan if v is None else v for v in q[k]], float) for k in ("mean", "min", "max")
        }
        ax.fill_between(x, as_array["min"], as_array["max"], alpha=0.25, label="min-max over batches")
        ax.plot(x, as_array["mean"], lw=1.8, label="mean")
        ax.set_title(name)
        ax.set_xlabel("simulation step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(
        f"imagination vs data ({result['actions']} actions, {result['batches']} batches of "
        f"{result['batch_size']})"
    )
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)
