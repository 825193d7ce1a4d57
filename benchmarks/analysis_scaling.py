"""Scaling of ``proclab analyze hidden`` with the number of episodes: time per phase and peak RSS.

Builds synthetic episode stores of GRU-like states (64-d, ``tanh`` of 16 planted Laplace
sources mixed into the units plus 32 planted cluster centres that each episode walks through
in segments, about 150 steps per episode; no frames, only the fields the analysis reads) and
runs ``analyze hidden`` on each in a fresh process, so that the peak resident memory is that
size's alone. Prints one JSON line per size (progress goes to stderr)::

    {"episodes": 1000, "points": 150123, "wall_s": ..., "peak_rss_gib": ...,
     "phases_s": {"outliers": ..., "ward clusters": ..., ...}, "assign_s_per_point_us": ...,
     "ari_planted_clusters": ...}

``assign_s`` sums the phases whose cost grows with the points beyond the fitted subsample
(reading, outlier distances, nearest centroid, NMF transform, t-SNE placement); the fits on the
subsample (basis, Ward, NMF, t-SNE) cost the same at every size. ``assign_s_per_point_us``
should stay flat as the stores grow.
``ari_planted_clusters`` compares the Ward clusters with the planted centres. Stores are cached
under ``--workdir``. On a shared 2-core CPU:

    python benchmarks/analysis_scaling.py --episodes 1000 4000 16000 --workdir /tmp/scaling
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

WIDTH, SOURCES, CENTRES, STEPS = 64, 16, 32, 150
ASSIGN = ("reading states", "outliers", "ward assign", "nmf assign", "t-sne assign")
"""Phases whose cost grows with the points (outliers includes the fixed kNN of the subsample)."""


def build_store(path: Path, episodes: int, seed: int = 0) -> None:
    """A store of ``episodes`` synthetic GRU episodes (lengths 100..200) with planted ICs and clusters."""
    from proclab.store import ShardWriter
    from proclab.store.schema import STATE_LAYOUT_ATTR

    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(SOURCES, WIDTH)) / np.sqrt(SOURCES)
    centres = rng.normal(size=(CENTRES, WIDTH)) * 1.5
    layout = {"core.0": [["core.0.h", [WIDTH]]]}
    with ShardWriter(path, attrs={STATE_LAYOUT_ATTR: layout}, commit_seconds=5.0) as writer:
        for _ in range(episodes):
            n = int(rng.integers(STEPS - 50, STEPS + 51))
            segment = np.repeat(rng.integers(0, CENTRES, 3), -(-n // 3))[:n]  # three planted clusters
            h = np.tanh(0.5 * (centres[segment] + rng.laplace(size=(n, SOURCES)) @ mixing))
            h += 0.02 * rng.normal(size=h.shape)
            logits = rng.normal(size=(n, 15)).astype(np.float32)
            writer.append(
                {
                    "state_out/core.0": h.astype(np.float32),
                    "logits_clean": logits,
                    "action": logits.argmax(1),
                    "value": rng.normal(size=n).astype(np.float32),
                    "reward": np.zeros(n, np.float32),
                    "terminated": np.arange(n) == n - 1,
                    "truncated": np.zeros(n, bool),
                    "planted": segment.astype(np.int64),
                },
                {"state_in0/core.0": np.zeros(WIDTH, np.float32)},
            )


def run_one(store: Path, out: Path, extra: list[str]) -> dict:
    """Analyse one store in this process; the line to print."""
    from sklearn.metrics import adjusted_rand_score

    from proclab.interpret.command import analyze_command
    from proclab.store import EpisodeStore

    start = time.perf_counter()
    analyze_command(["hidden", "--data", str(store), "--out", str(out), "--episodes", "1000000", *extra])
    wall = time.perf_counter() - start
    summary = json.loads((out / "hidden" / "summary.json").read_text())
    labels = np.load(out / "hidden" / "hidden.npz")["clusters"]
    planted = EpisodeStore(store).read_steps("planted")
    phases = summary["seconds"]
    assign = sum(v for k, v in phases.items() if k in ASSIGN)
    return {
        "episodes": summary["episodes"],
        "points": summary["points"],
        "fit_points": summary["fit_points"],
        "wall_s": round(wall, 2),
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
        "phases_s": phases,
        "assign_s": round(assign, 2),
        "assign_s_per_point_us": round(1e6 * assign / summary["points"], 3),
        "ari_planted_clusters": round(float(adjusted_rand_score(planted, labels)), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, nargs="+", default=[1000, 4000, 16000])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/proclab-analysis-scaling"))
    parser.add_argument("--plots", action="store_true", help="also draw the PNGs (off: arrays only)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: analyse one size here
    args, extra = parser.parse_known_args()
    extra += ["--state", "core.0.h", "--clusters", str(CENTRES)] + ([] if args.plots else ["--no-plots"])
    if args.one is not None:
        store = args.workdir / f"store-{args.one}"
        print(json.dumps(run_one(store, args.workdir / f"analysis-{args.one}", extra)), flush=True)
        return
    for n in args.episodes:
        store = args.workdir / f"store-{n}"
        if not (store.is_dir() and any(store.iterdir())):
            print(f"building {store} ...", file=sys.stderr, flush=True)
            t = time.perf_counter()
            build_store(store, n)
            print(f"built in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        cmd = [sys.executable, __file__, "--one", str(n), "--workdir", str(args.workdir), *sys.argv[1:]]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            print(json.dumps({"episodes": n, "error": done.stderr.strip().splitlines()[-1:]}), flush=True)
            continue
        print(done.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
