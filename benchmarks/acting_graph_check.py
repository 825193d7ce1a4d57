"""The graphed acting step on a GPU: same outputs as the eager step, and the time of one step of each.

For the ``cleanrl`` preset's agent (IMPALA CNN) on random frames, for each batch size: the CUDA
graph of :class:`~proclab.rl.acting_graph.ActingStep` against the same computation run eagerly,
with the same uniforms, before and after the weights change in place (as an optimiser step changes
them); then the median milliseconds of one eager and one graphed step (CUDA events, 200 repeats).
Prints one JSON line per batch size.

    python benchmarks/acting_graph_check.py --device cuda --batches 32 64
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from proclab.models import build_agent
from proclab.rl.acting_graph import ActingStep
from proclab.rl.config import preset
from proclab.run.runtime import make_runtime


def inputs(agent, n: int, dev):
    obs = torch.randint(0, 256, (n, 3, 64, 64), dtype=torch.uint8, device=dev)
    first = torch.rand(n, device=dev) < 0.1
    return (
        obs.contiguous(memory_format=torch.channels_last),
        first,
        torch.zeros(n, device=dev),
        {},
        torch.rand(n, device=dev),
    )


def compare(graphed: ActingStep, args) -> dict:
    g = [x.clone() for x in graphed(*args)[:3]]
    e = graphed._compute(*args)[:3]
    return {
        "actions_equal": float((g[0] == e[0]).float().mean()),
        "logprob_max_abs": float((g[1] - e[1]).abs().max()),
        "value_max_abs": float((g[2] - e[2]).abs().max()),
    }


def median_ms(fn, repeats: int = 200) -> float:
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return round(statistics.median(times), 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 64])
    args = parser.parse_args()
    rt = make_runtime(args.device, args.precision)
    torch.manual_seed(0)
    agent = rt.prepare(build_agent(preset("cleanrl").agent))
    for n in args.batches:
        graphed = ActingStep(agent, rt, n)
        data = inputs(agent, n, rt.device)
        before = compare(graphed, data)
        with torch.no_grad():
            for p in agent.parameters():
                p.mul_(1.01).add_(0.01 * torch.randn_like(p))
        after = compare(graphed, inputs(agent, n, rt.device))
        line = {
            "benchmark": "acting_graph_check",
            "device": torch.cuda.get_device_name(rt.device),
            "precision": args.precision,
            "bf16": rt.bf16,
            "batch": n,
            "before_weight_change": before,
            "after_weight_change": after,
            "eager_ms": median_ms(lambda graphed=graphed, data=data: graphed._compute(*data)),
            "graph_ms": median_ms(lambda graphed=graphed, data=data: graphed(*data)),
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
