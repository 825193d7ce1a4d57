"""Does a change of the code change any number the quickstart writes? Run it in two checkouts, compare.

    python benchmarks/quickstart_equivalence.py --before /path/to/old/checkout --after . --budget tiny

Each checkout's ``src`` runs ``proclab quickstart`` with the same seed, budget and settings, in this
interpreter, one after the other, with one shared cache folder (so a learner layout timed in the first
run is the one the second uses, and the timing cannot pick different arithmetic). Then every file the
two runs wrote is paired by its path (run directories' timestamps removed) and compared by content:
weights (safetensors) tensor by tensor, arrays (npz, npy, the episode stores' zarr chunks) exactly,
JSON and CSV files value by value with what measures time or names a folder left out (and the command
lines an analysis folder records as provenance), PNG images pixel by pixel. Videos and TensorBoard event files are left out (encoder and wall-clock metadata).

Prints one JSON line per differing file and a final line ``{"compared": N, "differing": K, ...}``;
exits 1 if anything differs. ``--runs DIR`` keeps the two output folders there.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SKIPPED_SUFFIXES = (".mp4", ".gif", ".pt", ".html", ".css", ".js", ".txt", ".log")
SKIPPED_NAMES = re.compile(r"events\.out\.tfevents|plotly")
# what measures wall-clock time, or depends on where the run was written (a digest of a file naming its folder),
# or on when a writer happened to commit; and ``args``, the command lines an analysis folder records as
# provenance (a renamed option changes them, not a result)
VOLATILE_KEY = re.compile(
    r"second|minute|time|sps|elapsed|duration|date|created|finished|started|_at$|^saved|host|pid|crc32|digest"
    r"|^commits$|rss|^id$|^args$",
    re.I,
)
SKIPPED_PICTURES = ("curves.png",)  # training curves plot throughput and wall-clock time
STAMP = re.compile(r"\d{8}-\d{6}")  # run directories: <seed>-<YYYYmmdd>-<HHMMSS>


def run_quickstart(checkout: Path, out: Path, args, cache: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(checkout / "src"), XDG_CACHE_HOME=str(cache), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "proclab", "quickstart", "--budget", args.budget, "--seed", str(args.seed)]
    cmd += ["--out", str(out), "--precision", args.precision, "--device", "cpu", *args.extra]
    start = time.time()
    with open(out.with_suffix(".log"), "w") as log:
        subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    return time.time() - start


def key(path: Path, root: Path) -> str:
    return STAMP.sub("STAMP", str(path.relative_to(root)))


def files(root: Path) -> dict[str, Path]:
    out = {}
    for p in sorted(root.rglob("*")):
        skipped = (
            p.name.endswith(SKIPPED_SUFFIXES) or p.name in SKIPPED_PICTURES or SKIPPED_NAMES.search(p.name)
        )
        if p.is_file() and not skipped:
            out[key(p, root)] = p
    return out


def scrub(value, roots: tuple[str, ...]):
    """JSON content without what measures time or names where the run was written."""
    if isinstance(value, dict):
        return {k: scrub(v, roots) for k, v in value.items() if not VOLATILE_KEY.search(str(k))}
    if isinstance(value, list):
        return [scrub(v, roots) for v in value]
    if isinstance(value, str):
        for r in roots:
            value = value.replace(r, "OUT")
        return STAMP.sub("STAMP", value)
    return value


def first_difference(a, b, where: str = "") -> str | None:
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{where}/{k}: only in {'after' if k not in a else 'before'}"
            found = first_difference(a[k], b[k], f"{where}/{k}")
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return None
    if a != b and not (isinstance(a, float) and np.isnan(a) and np.isnan(b)):
        return f"{where}: {a!r} vs {b!r}"
    return None


def same_array(a: np.ndarray, b: np.ndarray, roots: tuple[str, ...] = ()) -> bool:
    if a.dtype.kind == "U" and a.ndim == 0 and b.dtype.kind == "U":  # metadata saved as a JSON string
        try:
            return (
                first_difference(scrub(json.loads(str(a)), roots), scrub(json.loads(str(b)), roots)) is None
            )
        except json.JSONDecodeError:
            pass
    floating = a.dtype.kind in "fc" and b.dtype.kind in "fc"
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=floating))


def compare(a: Path, b: Path, roots: tuple[str, ...]) -> str | None:
    """None if the two files hold the same numbers, else where they first differ."""
    name = a.name
    if name.endswith(".json"):
        return first_difference(
            scrub(json.loads(a.read_text()), roots), scrub(json.loads(b.read_text()), roots)
        )
    if name.endswith(".csv"):
        ra, rb = (list(csv.DictReader(io.StringIO(p.read_text()))) for p in (a, b))
        return first_difference(scrub(ra, roots), scrub(rb, roots))
    if name.endswith((".npz", ".npy")):
        xa, xb = np.load(a, allow_pickle=False), np.load(b, allow_pickle=False)
        if name.endswith(".npy"):
            xa, xb = {"": xa}, {"": xb}
        for k in sorted(set(xa) | set(xb)):
            if k not in xa or k not in xb or not same_array(xa[k], xb[k], roots):
                return f"array {k!r} differs"
        return None
    if name.endswith(".safetensors"):
        from safetensors.numpy import load_file  # lazy: only weights need it

        ta, tb = load_file(a), load_file(b)
        for k in sorted(set(ta) | set(tb)):
            if k not in ta or k not in tb or not same_array(ta[k], tb[k]):
                return f"tensor {k!r} differs"
        return None
    if name.endswith(".png"):
        from PIL import Image  # lazy: only pictures need it

        pa, pb = (np.asarray(Image.open(p)) for p in (a, b))
        return None if pa.shape == pb.shape and np.array_equal(pa, pb) else "pixels differ"
    return None if a.read_bytes() == b.read_bytes() else "bytes differ"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, required=True, help="checkout of the old code (its src/ is run)")
    p.add_argument("--after", type=Path, default=Path("."), help="checkout of the new code (default: here)")
    p.add_argument(
        "--budget", default="tiny", help="quickstart budget (tiny: about a minute; small: about 9)"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--precision", default="auto", help="arithmetic of both runs (the same in both)")
    p.add_argument("--runs", type=Path, default=None, help="keep both output folders here")
    p.add_argument("extra", nargs="*", help="more quickstart options after --, e.g. -- --agent FILE")
    args = p.parse_args()
    base = Path(tempfile.mkdtemp(prefix="qs-equiv-")) if args.runs is None else args.runs
    base.mkdir(parents=True, exist_ok=True)
    cache = base / "cache"
    outs, seconds = {}, {}
    for name, checkout in (("before", args.before), ("after", args.after)):
        outs[name] = base / name
        if outs[name].exists():
            raise SystemExit(f"{outs[name]} exists; choose another --runs folder")
        seconds[name] = run_quickstart(checkout.resolve(), outs[name], args, cache)
    roots = tuple(str(o) for o in outs.values())
    fa, fb = files(outs["before"]), files(outs["after"])
    differing = 0
    for k in sorted(set(fa) | set(fb)):
        if k not in fa or k not in fb:
            why = f"only {'after' if k not in fa else 'before'}"
        else:
            why = compare(fa[k], fb[k], roots)
        if why:
            differing += 1
            print(json.dumps({"file": k, "difference": why}))
    summary = {"compared": len(set(fa) & set(fb)), "differing": differing, "budget": args.budget}
    print(json.dumps(summary | {"seconds": {k: round(v, 1) for k, v in seconds.items()}, "runs": str(base)}))
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
