"""Saliency throughput through the world model: samples per second, against a plain simulation.

For each world-model size, in one run: ``simulate`` (the forward simulation alone, no gradient:
the baseline), ``saliency`` (re-simulation with gradients and one backward pass per target,
``--targets`` at ``--step``, copy-0-only: ``--noise 0``) and ``smoothgrad`` (the seed's
setting, ``--smooth-noise`` noised copies per sample). One JSON line per measurement:

    {"size": "small", "mode": "saliency", "targets": 2, "copies": 1, "batch": 8, "steps": 10,
     "samples_per_s": ..., "ratio_to_simulate": ..., "device": "cpu", "threads": 2}

The agent in the loop is the seed's (``interp-gru``), untrained; the world model is freshly
initialised (the speed does not depend on the weights). Median of ``--repeats`` timed batches
after ``--warmup``. Quick run on a CPU:

    python benchmarks/saliency_throughput.py --sizes small,paper --batch 4 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from proclab.interpret.saliency.targets import parse_targets
from proclab.interpret.saliency.world_model import saliency_batch
from proclab.models import agent_preset, build_agent
from proclab.models.loading import freeze
from proclab.run.runtime import make_runtime
from proclab.worldmodel.config import WM_SIZES
from proclab.worldmodel.model import WorldModel
from proclab.worldmodel.simulate import dreamed, random_bottlenecks


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(size: str, args) -> list[dict]:
    rt = make_runtime(args.device, "fp32")
    torch.manual_seed(0)
    agent = freeze(rt.prepare(build_agent(agent_preset("interp-gru"))))
    wm = freeze(rt.prepare(WorldModel(WM_SIZES[size].model, agent.config.num_actions, agent.state_shapes())))
    b = random_bottlenecks(args.batch, wm.config.bottleneck, torch.Generator().manual_seed(0)).to(rt.device)
    targets = parse_targets(args.targets.split(","))

    def simulate():
        with torch.no_grad():
            dreamed(wm, agent, b, args.steps)

    modes = {
        "simulate": (simulate, 0, 1),
        "saliency": (lambda: saliency_batch(wm, agent, b, targets, args.step, args.steps), len(targets), 1),
        "smoothgrad": (
            lambda: saliency_batch(wm, agent, b, targets, args.step, args.steps, noise=args.smooth_noise),
            len(targets),
            1 + args.smooth_noise,
        ),
    }
    rows, base = [], None
    for mode, (fn, n_targets, copies) in modes.items():
        print(f"{size} {mode} ...", file=sys.stderr)
        rate = args.batch / timed(fn, rt.device, args.warmup, args.repeats)
        base = base or rate
        rows.append(
            {
                "size": size,
                "mode": mode,
                "targets": n_targets,
                "copies": copies,
                "batch": args.batch,
                "steps": args.steps,
                "samples_per_s": round(rate, 3),
                "ratio_to_simulate": round(rate / base, 4),
                "device": str(rt.device),
                "threads": torch.get_num_threads(),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="small,paper", help="comma-separated world-model sizes")
    parser.add_argument("--batch", type=int, default=8, help="samples per batch")
    parser.add_argument("--steps", type=int, default=10, help="simulated steps per sample (the seed's: 10)")
    parser.add_argument("--step", type=int, default=4, help="target step")
    parser.add_argument("--targets", default="value,action", help="comma-separated saliency targets")
    parser.add_argument("--smooth-noise", type=int, default=8, help="noised copies of the smoothgrad mode")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    args = parser.parse_args(argv)
    for size in args.sizes.split(","):
        for row in measure(size, args):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
