"""The sparse dictionary of ``analyze atlas --basis sparse``: proclab's top-k autoencoder against scikit-learn's
MiniBatchDictionaryLearning, on the same states, atoms and sparsity.

Both fit ``--expansion`` x D atoms with ``--k`` active per state on the first ``--episodes`` episodes of
``--data`` (the recorded ``state_out/core.0.h``; default: Gaussian-mixture states of ``--dim`` units).
Lines (JSON):

    {"method": "topk", "fit_s": ..., "encode_us_per_state": ..., "variance_explained": ..., "dead": ..., ...}
    {"method": "sklearn", ...}                  (OMP codes with k non-zeros, the same z-scoring)
    {"method": "ratio", "encode": <sklearn / topk time per state>, "fit": <sklearn / topk>}

Encoding is what the sweep does at every step of every played episode (256 states per agent forward), so
it is timed on batches of 256. ``variance_explained`` is 1 - FVU of the z-scored states, the number the
atlas reports. Quick run:

    python benchmarks/sparse_dictionary.py --data STORE --episodes 300
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch

from proclab.interpret.bases.sparse_dictionary import DictionaryConfig, SparseDictionary
from proclab.run.runtime import cpu_name


def states(args) -> np.ndarray:
    if args.data:
        from proclab.interpret.bases.activations import read_activation
        from proclab.store import EpisodeStore

        store = EpisodeStore(args.data)
        return read_activation(
            store, "state_out/core.0.h", np.arange(min(args.episodes, store.num_episodes))
        ).x
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(32, args.dim)) * 2
    return (centres[rng.integers(0, 32, 50_000)] + rng.normal(size=(50_000, args.dim))).astype(np.float32)


def timed_encode(encode, x: np.ndarray, batches: int = 40) -> float:
    """Microseconds per state, encoding batches of 256."""
    rows = [x[i * 256 : (i + 1) * 256] for i in range(min(batches, len(x) // 256))]
    start = time.perf_counter()
    for r in rows:
        encode(r)
    return 1e6 * (time.perf_counter() - start) / (256 * len(rows))


def topk(x: np.ndarray, args) -> dict:
    config = DictionaryConfig(expansion=args.expansion, k=args.k, steps=args.steps)
    start = time.perf_counter()
    d = SparseDictionary.fit(x, config)
    fit = time.perf_counter() - start
    with torch.no_grad():
        us = timed_encode(lambda r: d.encode(torch.as_tensor(r)), x)
    q = d.quality(x)
    return {"method": "topk", "fit_s": round(fit, 2), "encode_us_per_state": round(us, 2), **_quality(q)}


def sklearn(x: np.ndarray, args) -> dict:
    from sklearn.decomposition import MiniBatchDictionaryLearning

    mean, std = x.mean(0), x.std(0)
    std[std == 0] = 1
    z = (x - mean) / std
    model = MiniBatchDictionaryLearning(
        n_components=args.expansion * x.shape[1],
        batch_size=1024,
        max_iter=args.sklearn_epochs,
        transform_algorithm="omp",
        transform_n_nonzero_coefs=args.k,
        random_state=0,
    )
    start = time.perf_counter()
    model.fit(z)
    fit = time.perf_counter() - start
    us = timed_encode(lambda r: model.transform((r - mean) / std), x)
    codes = model.transform(z)
    zr = codes @ model.components_
    share = (codes != 0).mean(0)
    q = {
        "variance_explained": 1 - ((z - zr) ** 2).sum() / ((z - z.mean(0)) ** 2).sum(),
        "atoms": len(share),
        "dead": int((share == 0).sum()),
        "dense": int((share > 0.1).sum()),
    }
    return {"method": "sklearn", "fit_s": round(fit, 2), "encode_us_per_state": round(us, 2), **_quality(q)}


def _quality(q: dict) -> dict:
    return {
        k: (round(float(q[k]), 4) if k == "variance_explained" else q[k])
        for k in ("variance_explained", "atoms", "dead", "dense")
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data", help="episode store whose state_out/core.0.h is fitted (default: synthetic states)"
    )
    p.add_argument("--episodes", type=int, default=300, help="episodes of --data read")
    p.add_argument("--dim", type=int, default=64, help="state width of the synthetic states")
    p.add_argument("--expansion", type=int, default=4, help="atoms per state unit")
    p.add_argument("--k", type=int, default=8, help="atoms active per state")
    p.add_argument("--steps", type=int, default=4000, help="top-k autoencoder: Adam steps")
    p.add_argument(
        "--sklearn-epochs", type=int, default=3, help="MiniBatchDictionaryLearning: passes over the data"
    )
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    x = states(args)
    head = {
        "states": len(x),
        "dim": x.shape[1],
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    a, b = topk(x, args), sklearn(x, args)
    for row in (a, b):
        print(json.dumps({**row, **head}), flush=True)
    ratio = {
        "encode": round(b["encode_us_per_state"] / a["encode_us_per_state"], 1),
        "fit": round(b["fit_s"] / a["fit_s"], 2),
    }
    print(json.dumps({"method": "ratio", **ratio}))


if __name__ == "__main__":
    main()
