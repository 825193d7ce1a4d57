"""Wall time and peak memory of building a direction atlas, in a fresh process (``proclab analyze atlas``).

Runs ``proclab analyze atlas --out ANALYSIS ARGS...`` once and prints one JSON line: the process' wall time
and peak resident memory (``getrusage`` of the child), the atlas' own phase times from ``atlas.json``, the
episodes and steps described, the number of directions, the CPU and the load average before and after (a
shared machine's other jobs show there). Example, the ICs and then the sparse dictionary of one folder:

    python benchmarks/atlas_build.py A --basis ica --episodes 1000 --torch-threads 2
    python benchmarks/atlas_build.py A --basis sparse --episodes 1000 --torch-threads 2
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from proclab.run.runtime import cpu_name


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    analysis, rest = Path(sys.argv[1]), sys.argv[2:]
    basis = rest[rest.index("--basis") + 1] if "--basis" in rest else "ica"
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "proclab", "analyze", "atlas", "--out", str(analysis), *rest]
    )
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if done.returncode != 0:
        sys.exit(done.returncode)
    atlas = json.loads(
        (analysis / ("atlas" if basis == "ica" else f"atlas-{basis}") / "atlas.json").read_text()
    )
    print(
        json.dumps(
            {
                "bench": "atlas_build",
                "basis": basis,
                "directions": atlas["k"],
                "episodes": atlas["episodes"],
                "steps": atlas["steps"],
                "wall_s": round(wall, 1),
                "peak_rss_mib": round(peak, 1),
                "phases_s": atlas["seconds"],
                "swept": atlas["counts"]["swept"],
                "significant": atlas["counts"]["significant"],
                "variance_explained": round(atlas["variance_explained"], 4),
                "cpu": cpu_name(),
                "cores": os.cpu_count(),
                "load_before": round(load_before, 2),
                "load_after": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
