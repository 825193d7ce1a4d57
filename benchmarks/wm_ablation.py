"""World-model ablations: train each arm for the same budget on the same store, judge it with ``wm evaluate``.

Each arm is a preset with some fields changed (so that every ablation is a flag of ``proclab wm train``);
all arms see the same windows in the same order (same seed) and are evaluated on the same held-out
windows. Prints one JSON line per arm (progress goes to stderr):

    {"arm": "cpu", "updates": 150, "train_s": ..., "closed_loop_k1": ..., "repeat_last_k1": ...,
     "closed_minus_best_k1": [lo, hi], "closed_loop_kH": ..., "best_baseline_kH": ...,
     "changed_closed_k1": ..., "changed_repeat_k1": ..., "auc_closed": ..., "drift_ratio_dream": ...,
     "loadavg": [...], ...}

Quick run on a CPU (a few minutes per arm; for the real protocol see docs/worldmodel.md):

    python benchmarks/wm_ablation.py --data train.zarr --heldout heldout.zarr --updates 150 \
        --arms small,cpu,cpu-no-shift,cpu-no-changed-loss --horizon 8 --windows 128
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from proclab.run.runtime import RuntimeConfig
from proclab.worldmodel.checkpoint import TrainedWorldModel
from proclab.worldmodel.config import WMTrainConfig, wm_size
from proclab.worldmodel.evaluation import EvaluationSettings, evaluate_into
from proclab.worldmodel.trainer import train_world_model

NAMED = {
    "cpu-no-shift": "cpu+camera_shift=0",
    "cpu-no-changed-loss": "cpu+loss.changed_pixels=0",
    "small+changed-loss": "small+loss.changed_pixels=10",
}
"""Arms of earlier ablations, by name."""


def arm_config(arm: str) -> WMTrainConfig:
    """The training defaults of an arm: a size, with fields changed by ``+FIELD=VALUE`` parts
    (``cpu+camera_shift=12+loss.shift=1``: a model field, ``loss.X`` a loss weight, else a training field),
    or a name of :data:`NAMED`."""
    size, *changes = NAMED.get(arm, arm).split("+")
    try:
        cfg = wm_size(size)
    except Exception as err:
        raise SystemExit(f"arm {arm!r}: {err}") from None
    for change in changes:
        name, _, value = change.partition("=")
        group, _, field = name.rpartition(".")
        target = {"": cfg.model, "loss": cfg.loss}.get(group)
        if target is None or (not hasattr(target, field) and not hasattr(cfg, field)):
            raise SystemExit(f"arm {arm!r}: unknown field {name!r}")
        if group == "" and not hasattr(cfg.model, field):  # a training field
            cfg = replace(cfg, **{field: type(getattr(cfg, field))(value)})
        elif group == "loss":
            cfg = replace(cfg, loss=replace(cfg.loss, **{field: float(value)}))
        else:
            cfg = replace(
                cfg, model=replace(cfg.model, **{field: type(getattr(cfg.model, field))(float(value))})
            )
    return cfg


def summary(arm: str, result: dict, seconds: float) -> dict:
    mse, changed, H = result["mse"], result["changed_pixels"], result["horizon"]

    def at(table, name, k):
        return table["mean"][name][k - 1]["mean"]

    best_h = min(
        ("repeat last frame", "past mean frame", "other episodes' mean frame"), key=lambda b: at(mse, b, H)
    )
    reward, drift = result["reward"], result["drift"] or {}
    real = mse.get("closed_loop_minus_real_game")  # the gap to an exact simulator, where it was played
    return {
        "arm": arm,
        "updates": result["updates"],
        "train_s": round(seconds, 1),
        "windows": result["windows"],
        "episodes": result["episodes"],
        "teacher_forced_k1": at(mse, "teacher-forced", 1),
        "closed_loop_k1": at(mse, "closed loop", 1),
        "open_loop_k1": at(mse, "open loop", 1),
        "repeat_last_k1": at(mse, "repeat last frame", 1),
        "closed_minus_best_k1": mse["minus_better_baseline"]["closed loop"][0]["ci95"],
        "closed_loop_kH": at(mse, "closed loop", H),
        "best_baseline_kH": at(mse, best_h, H),
        "closed_minus_best_kH": mse["minus_better_baseline"]["closed loop"][H - 1]["ci95"],
        "closed_minus_real_game_kH": None if real is None else real[H - 1]["ci95"],
        "changed_closed_k1": at(changed, "closed loop", 1),
        "changed_repeat_k1": at(changed, "repeat last frame", 1),
        "auc_closed": reward["closed loop"]["auc"],
        "reward_positives": reward["positives"],
        "drift_ratio_closed": drift.get("closed loop", {}).get("median_ratio"),
        "drift_ratio_dream": drift.get("dream", {}).get("median_ratio"),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="training episode store")
    p.add_argument("--heldout", type=Path, required=True, help="held-out episode store (other levels)")
    p.add_argument("--agent", type=Path, default=None, help="agent checkpoint (default: the store's)")
    p.add_argument("--arms", default="small,cpu,cpu-no-shift,cpu-no-changed-loss")
    p.add_argument("--updates", type=int, default=150, help="updates per arm")
    p.add_argument("--time-limit", type=float, default=0, help="seconds per arm (0: none)")
    p.add_argument("--horizon", type=int, default=8)
    p.add_argument(
        "--keep-every", type=int, default=0, help="also keep a checkpoint every N updates (0: the last)"
    )
    p.add_argument("--windows", type=int, default=128)
    p.add_argument("--run-root", type=Path, default=Path("runs-ablation"))
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--precision", default="auto")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    for arm in args.arms.split(","):
        cfg = replace(
            arm_config(arm),
            data=args.data,
            agent=args.agent,
            total_updates=args.updates,
            time_limit=args.time_limit,
            run_root=args.run_root,
            name=arm.replace("=", "-").replace("+", "_"),
            seed=args.seed,
            torch_threads=args.torch_threads,
            precision=args.precision,
            num_workers=0,
            checkpoint_every=args.keep_every or args.updates,
            keep_checkpoints=0,
            video_every=0,
            video_samples=0,
            tensorboard=False,
        )
        print(f"training {arm} for {args.updates} updates", file=sys.stderr)
        t0 = time.time()
        run = train_world_model(cfg.data, cfg, progress=False).run_dir
        seconds = time.time() - t0
        runtime = RuntimeConfig(precision="fp32", torch_threads=args.torch_threads)  # as docs/worldmodel.md's
        result = evaluate_into(
            run / "evaluation",
            TrainedWorldModel.load(run, runtime=runtime.runtime()),
            args.heldout,
            EvaluationSettings(
                horizon=args.horizon, within=args.horizon, windows=args.windows, seed=args.seed
            ),
            progress=False,
        )
        row = summary(arm, result, seconds) | {
            "run": str(run),
            "precision": args.precision,
            "torch_threads": args.torch_threads,
            "loadavg": [round(x, 2) for x in os.getloadavg()],
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
