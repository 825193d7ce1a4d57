"""Per-stage wall time of ``proclab quickstart`` with each precision, on this machine.

Runs the whole quickstart once per ``--precisions`` entry (fresh folders, same budget and seed)
and prints one JSON line per run: the CPU, whether it has native bf16, the precision the run
resolved to, each stage's seconds, the total, and the agent's and the random agent's held-out
returns; then one line with the ratio of each run's total to the first one's (the baseline,
measured in the same invocation). The training stages have budgets in seconds, so their times
are nearly fixed; what differs between precisions is how far they get (``train_steps``).

    python benchmarks/quickstart_time.py                      # fp32 and auto, the default budget
    python benchmarks/quickstart_time.py --budget tiny --precisions fp32
    python benchmarks/quickstart_time.py --agent model_78053376.pth   # an imported agent (no training)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from proclab.quickstart import QuickstartArgs, run


def measure(budget: str, precision: str, root: Path, keep: Path | None, agent: Path | None) -> dict:
    out = (keep or root) / f"quickstart-{precision}"
    started = time.perf_counter()
    run(QuickstartArgs(out=out, budget=budget, precision=precision, agent=agent))
    wall = time.perf_counter() - started
    summary = json.loads((out / "summary.json").read_text())
    table = json.loads((out / summary["outputs"]["eval"]["eval"]).read_text())
    # the held-out split is the last row: test1 for a trained agent, the levels after an --agent's own
    heldout, random = table["rows"][-1], table["random"][-1]
    return {
        "budget": budget,
        "agent": None if agent is None else str(agent),
        "requested_precision": precision,
        **summary["machine"],
        "stage_seconds": summary["seconds"],
        "total_seconds": round(sum(summary["seconds"].values()), 1),
        "wall_seconds": round(wall, 1),
        "train_steps": summary["outputs"]["train"].get("steps"),
        "heldout_split": heldout["split"],
        "return_heldout": heldout["return_mean"],
        "random_return_heldout": random["return_mean"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budget", default="small")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "auto"])
    parser.add_argument(
        "--keep", type=Path, default=None, help="write the runs here instead of a temporary folder"
    )
    parser.add_argument(
        "--agent", type=Path, default=None, help="study this checkpoint instead of training one"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(args.budget, p, Path(tmp), args.keep, args.agent) for p in args.precisions]
    for row in rows:
        print(json.dumps(row))
    base = rows[0]["total_seconds"]
    print(
        json.dumps(
            {
                "baseline": args.precisions[0],
                "total_ratio": {r["requested_precision"]: round(r["total_seconds"] / base, 3) for r in rows},
            }
        )
    )


if __name__ == "__main__":
    main()
