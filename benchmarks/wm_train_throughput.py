"""World-model training throughput: sequences per second of full updates (teacher-forced forward with
the agent in the loop, loss, backward, Adam step) for each size, fp32 vs the optimised path, in one run.

Prints one JSON line per measurement (progress goes to stderr):

    {"size": "small", "path": "optimised", "precision": "bf16", "channels_last": true, "batch": 16,
     "window": 18, "sequences_per_s": ..., "ms_per_update": ..., "ratio_to_fp32": ..., "device": "cpu", ...}

``fp32`` is float32 with channels-first convolutions; ``optimised`` is what ``proclab wm train``
runs by default: channels-last, and bf16 autocast where the hardware has it (CUDA >= sm80, or
CPUs with AVX-512 BF16/AMX; elsewhere it stays fp32). The agent in the loop is the seed's
(``interp-gru``: IMPALA 16/32/32, FC 64, GRU 64), untrained and frozen; batches are random
frames of the size's window (the speed does not depend on the pixels). The time per update is
the median over ``--repeats`` timed updates after ``--warmup`` untimed ones. Quick run on a CPU:

    python benchmarks/wm_train_throughput.py --sizes small,paper --batch-size 4 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from proclab.models import agent_preset, build_agent
from proclab.models.loading import freeze
from proclab.run.runtime import make_runtime
from proclab.worldmodel.batch import synthetic_batch
from proclab.worldmodel.config import WM_SIZES
from proclab.worldmodel.losses import world_model_loss
from proclab.worldmodel.model import WorldModel
from proclab.worldmodel.simulate import teacher_forced

PATHS = {
    "fp32": dict(precision="fp32", channels_last=False),
    "optimised": dict(precision="auto", channels_last=True),
}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(size: str, path: str, args) -> dict:
    cfg = WM_SIZES[size]
    rt = make_runtime(args.device, **PATHS[path])
    torch.manual_seed(0)
    agent = freeze(rt.prepare(build_agent(agent_preset("interp-gru"))))
    wm = rt.prepare(WorldModel(cfg.model, agent.config.num_actions, agent.state_shapes()))
    optimizer = torch.optim.Adam(wm.parameters(), lr=cfg.learning_rate)
    batch_size = args.batch_size or cfg.batch_size
    batch = synthetic_batch(wm.config, wm.codec.width, batch_size, agent.config.num_actions).to(rt.device)

    def update():
        with rt.autocast():
            start, traj = teacher_forced(wm, agent, batch)
        loss, _ = world_model_loss(start, traj, batch, cfg.loss)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(wm.parameters(), cfg.max_grad_norm)
        optimizer.step()

    for _ in range(args.warmup):
        update()
    sync(rt.device)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        update()
        sync(rt.device)
        times.append(time.perf_counter() - t0)
    seconds = statistics.median(times)
    return {
        "size": size,
        "path": path,
        "precision": "bf16" if rt.bf16 else "fp32",
        "channels_last": rt.channels_last,
        "batch": batch_size,
        "window": cfg.model.window,
        "sim_steps": cfg.model.num_sim_steps,
        "sequences_per_s": round(batch_size / seconds, 3),
        "ms_per_update": round(1000 * seconds, 1),
        "params_m": round(sum(p.numel() for p in wm.parameters()) / 1e6, 2),
        "device": str(rt.device),
        "device_name": torch.cuda.get_device_name(rt.device) if rt.device.type == "cuda" else "cpu",
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="small,paper", help="comma-separated sizes: " + ", ".join(WM_SIZES)
    )
    parser.add_argument("--paths", default="fp32,optimised", help="comma-separated: fp32, optimised")
    parser.add_argument("--batch-size", type=int, default=0, help="windows per update (0: the size's own)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    for size in args.sizes.split(","):
        base = None
        for path in args.paths.split(","):
            print(f"measuring {size} / {path} ...", file=sys.stderr)
            row = measure(size, path, args)
            base = base or (row["sequences_per_s"] if path == "fp32" else None)
            row["ratio_to_fp32"] = round(row["sequences_per_s"] / base, 3) if base else None
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
