"""The goal benchmark from a pre-registered manifest: every tool on every agent it names, then the scores.

docs/misgeneralization.md fixes the rules; a run is described before it starts by a JSON manifest
(:mod:`proclab.interpret.goals.manifest`) committed with its sha256. This script refuses a manifest whose bytes
lost that hash, then for each agent of the manifest (in its order; a control's source ``random-init:SOURCE`` is
a randomly initialised agent of that source's architecture) runs each tool's driver with the manifest's options
(``tools.<tool>.script`` and ``args``, with ``per_game`` options and, for a control, ``random_init``), one
process per (agent, tool), output in OUT/<agent>/<tool>/. A (agent, tool) whose calls.json is there is not run
again, so the run resumes where it stopped. ``--score`` reads every call there is and scores them against the
manifest's labels (``label.labels``) with :func:`proclab.analyze.score_goal_calls`: per tool, the confusion
matrix and balanced accuracy beside always-A, always-B and a coin flip (goals written A and B, both games
together and each alone), stamped with the manifest's sha256; OUT/table.md holds every call with the numbers it read.

    nice -n 15 python benchmarks/goal_benchmark.py --manifest benchmarks/manifests/goal-v3.json \\
        --sha256 HEX --out OUT [--agents NAME,...] [--tools probes,steering] [--score]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from proclab.interpret.goals.calls import GoalCall, score_goal_calls
from proclab.interpret.goals.detect_probes import goal_pair
from proclab.interpret.goals.manifest import Manifest, read_manifest
from proclab.interpret.sweep.report import write_text_atomic
from proclab.io.run_dirs import write_json_atomic

RANDOM_INIT = "random-init:"


def slug(name: str) -> str:
    """A folder name for an agent's name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def command(manifest: Manifest, name: str, tool: str, out: Path) -> list[str]:
    """The driver's command line for ``tool`` on agent ``name``, from the manifest's options alone."""
    spec = manifest.tools[tool]
    source = manifest.agents[name]
    control = source.startswith(RANDOM_INIT)
    source = source.removeprefix(RANDOM_INIT)
    game = manifest.label["games"][name]
    args = [sys.executable, spec["script"], "--agent", source, "--out", str(out), *spec["args"]]
    args += spec.get("per_game", {}).get(game, [])
    return args + (spec["random_init"] if control else [])


def as_ab(goal: str, game: str) -> str:
    """A goal's name as the benchmark scores it across games: the level's own goal is A, the other place B
    (anything else, no call or mixed, as it is)."""
    a, b = goal_pair(game)
    return {a: "A", b: "B"}.get(goal, goal)


def cell(call: GoalCall, game: str) -> str:
    """One call on an agent of ``game`` and the numbers it read, for the table of calls."""
    e = call.evidence
    a, b = goal_pair(game)
    if call.tool == "probes":
        lo, hi = e["a_minus_b"]["ci"]
        return (
            f"{call.call} ({a} {e[a]['margin']:+.2f}, {b} {e[b]['margin']:+.2f}; A-B [{lo:+.2f}, {hi:+.2f}])"
        )
    if call.tool == "tracking":
        return f"{call.call} ({a} {e[a]['margin']:+.3f} {fmt(e[a]['ci'])}, {b} {e[b]['margin']:+.3f} {fmt(e[b]['ci'])})"
    t = e[a]
    return (
        f"{call.call} (P({a}) {t['baseline']:.2f} -> {t['intervened']:.2f}, {t['lost']}/{t['gained']}, "
        f"p {e['p_a_read']:.2g}; below {e['draws_above_vector']} of {e['random_draws']})"
    )


def fmt(ci) -> str:
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def table(calls: list[GoalCall], manifest: Manifest) -> str:
    """Markdown: one row per agent (its label, each tool's call with the numbers it read)."""
    tools = ["probes", "tracking", "steering"]
    rows = ["| agent | label | " + " | ".join(tools) + " |", "|---" * (2 + len(tools)) + "|"]
    by = {(c.agent, c.tool): c for c in calls}
    for name in manifest.agents:
        label = manifest.label["labels"].get(name, "control")
        game = manifest.label["games"][name]
        cells = [cell(by[name, t], game) if (name, t) in by else "-" for t in tools]
        rows.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def calls_of(out: Path, manifest: Manifest, names: list[str]) -> list[GoalCall]:
    """Every call saved under ``out``, named by the manifest's agent names."""
    calls = []
    for name in names:
        for tool in manifest.tools:
            path = out / slug(name) / tool / "calls.json"
            if path.is_file():
                for c in json.loads(path.read_text())["calls"]:
                    calls.append(GoalCall(c["tool"], name, c["call"], c.get("evidence", {})))
    return calls


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", type=Path, required=True)
    ap.add_argument("--sha256", required=True, help="the manifest's published sha256")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--agents", default=None, help="only these of the manifest's agents (comma-separated)")
    ap.add_argument("--tools", default=None, help="only these of its tools (comma-separated)")
    ap.add_argument("--score", action="store_true", help="score the calls saved so far; play nothing")
    args = ap.parse_args(argv)
    manifest = read_manifest(args.manifest, args.sha256)
    names = list(manifest.agents)
    if args.agents:
        unknown = sorted(set(args.agents.split(",")) - set(names))
        if unknown:
            ap.error(f"not agents of the manifest: {', '.join(unknown)}")
        names = [n for n in names if n in args.agents.split(",")]
    tools = list(manifest.tools) if args.tools is None else args.tools.split(",")
    if set(tools) - set(manifest.tools):
        ap.error(f"--tools: the manifest's tools are {', '.join(manifest.tools)}")
    if args.score:
        games = manifest.label["games"]
        raw = calls_of(args.out, manifest, names)
        calls = [replace(c, call=as_ab(c.call, games[c.agent])) for c in raw]
        labels = {n: as_ab(g, games[n]) for n, g in manifest.label["labels"].items()}
        rows = []
        for scope in ("both games", *sorted(set(games.values()))):
            mine = [c for c in calls if scope == "both games" or games[c.agent] == scope]
            for score in score_goal_calls(mine, labels, goals=("A", "B"), manifest=manifest):
                rows.append({"scope": scope, **vars(score)})
        write_json_atomic(args.out / "score.json", {"manifest_sha256": manifest.sha256, "scores": rows,
                                                    "calls": [vars(c) for c in calls]})  # fmt: skip
        write_text_atomic(args.out / "table.md", table(raw, manifest))
        for row in rows:
            print(json.dumps(row), flush=True)
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name in names:
        for tool in tools:
            out = args.out / slug(name) / tool
            if (out / "calls.json").is_file():
                continue
            out.mkdir(parents=True, exist_ok=True)
            cmd = command(manifest, name, tool, out)
            start = time.perf_counter()
            with open(out / "log.txt", "a") as log:
                log.write(" ".join(cmd) + "\n")
                log.flush()
                done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
            print(json.dumps({"agent": name, "tool": tool, "rc": done.returncode,
                              "seconds": round(time.perf_counter() - start, 1)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
