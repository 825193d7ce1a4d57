"""Agent throughput: acting (``step``, batch 64) and learning (``unroll`` + backward, batch 2048)
samples per second for every core, in fp32 and in bf16 autocast + channels-last, in one run.

Prints one JSON line per measurement (progress goes to stderr):

    {"core": "srwm", "mode": "inference", "batch": 64, "unroll": 1, "precision": "bf16+channels_last",
     "samples_per_s": ..., "ratio_to_fp32": ..., "device": "cuda", ...}

``samples_per_s`` uses the median time per call over ``--repeats`` timed calls (after
``--warmup`` untimed ones), so bursts of contention on a shared machine do not dominate.
``ratio_to_fp32`` divides by the fp32 number of the same core and mode measured in this run.
Agents are the seeds' presets: ``srwm-<core>`` (FC 256, previous reward, modern-srwm core dims)
and ``interp-gru`` for ``gru``. Training batches are ``unroll x (train_batch / unroll)``
time-major sequences, as a learner sees them. Quick run on a CPU:

    python benchmarks/agent_throughput.py --cores none,srwm --repeats 2 --train-batch 256
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace

import torch

from proclab.models import AGENT_PRESETS, CORES, build_agent

PRECISIONS = ("fp32", "bf16+channels_last")


def preset_for(core: str):
    return AGENT_PRESETS["interp-gru"] if core == "gru" else AGENT_PRESETS[f"srwm-{core}"]


def frames(shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """uint8 frames laid out as the env delivers them: channels-first views of channels-last memory."""
    hwc = torch.randint(0, 256, (*shape, 64, 64, 3), dtype=torch.uint8, device=device)
    return hwc.movedim(-1, -3)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, warmup: int, repeats: int, device: torch.device) -> float:
    """Median seconds per call: robust to the bursts of contention of a shared machine."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(core: str, mode: str, precision: str, args, device: torch.device) -> dict:
    torch.manual_seed(0)
    config = replace(preset_for(core), detach_every_step=args.detach)
    agent = build_agent(config).to(device)
    autocast = precision != "fp32"
    if autocast:
        agent.channels_last()
    amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast)

    if mode == "inference":
        batch, unroll = args.infer_batch, 1
        agent.eval()
        obs = frames((batch,), device)
        first = torch.zeros(batch, dtype=torch.bool, device=device)
        reward = torch.zeros(batch, device=device)
        holder = {"state": agent.initial_state(batch, device)}

        def run():
            with torch.inference_mode(), amp:
                _, holder["state"] = agent.step(obs, holder["state"], first, reward)

    else:
        unroll = args.unroll
        batch = max(1, args.train_batch // unroll)
        obs = frames((unroll, batch), device)
        firsts = torch.zeros(unroll, batch, dtype=torch.bool, device=device)
        firsts[0] = True
        rewards = torch.zeros(unroll, batch, device=device)
        state = agent.initial_state(batch, device)

        def run():
            agent.zero_grad(set_to_none=True)
            with amp:
                out, _ = agent.unroll(obs, state, firsts, rewards)
                loss = out.logits.logsumexp(-1).sum() + out.value.square().sum()
            loss.backward()

    seconds = timed(run, args.warmup, args.repeats, device)  # per call
    return {
        "core": core,
        "mode": mode,
        "batch": batch,
        "unroll": unroll,
        "precision": precision,
        "samples_per_s": round(batch * unroll / seconds, 1),
        "device": device.type,
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "detach_every_step": args.detach,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--cores", default=",".join(sorted(CORES)), help="comma-separated cores (default: all)")
    p.add_argument("--modes", default="inference,train", help="inference and/or train")
    p.add_argument("--precisions", default=",".join(PRECISIONS), help="fp32 and/or bf16+channels_last")
    p.add_argument("--repeats", type=int, default=20, help="timed iterations per measurement")
    p.add_argument("--warmup", type=int, default=2, help="untimed iterations first")
    p.add_argument("--infer-batch", type=int, default=64)
    p.add_argument("--train-batch", type=int, default=2048, help="samples per training batch (unroll x envs)")
    p.add_argument("--unroll", type=int, default=32, help="time steps per training sequence")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: leave as is)")
    p.add_argument("--detach", action="store_true", help="detach_every_step (published semantics)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cores = [c for c in args.cores.split(",") if c]
    unknown = sorted(set(cores) - set(CORES))
    if unknown:
        p.error(f"unknown cores {unknown}; valid: {sorted(CORES)}")
    precisions = [q for q in PRECISIONS if q in args.precisions.split(",")]
    if "fp32" in precisions:
        precisions.remove("fp32")
        precisions.insert(0, "fp32")
    for core in cores:
        for mode in args.modes.split(","):
            baseline = None
            for precision in precisions:
                print(f"{core} {mode} {precision} ...", file=sys.stderr, flush=True)
                row = measure(core, mode, precision, args, device)
                if precision == "fp32":
                    baseline = row["samples_per_s"]
                row["ratio_to_fp32"] = round(row["samples_per_s"] / baseline, 3) if baseline else None
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
