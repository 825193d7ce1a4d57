"""The cost of a cross-validated probe: seconds to fit and score one target from N states, with its controls.

The activations are a random low-rank matrix of the width of a hook (``--width``: 256 for a
train-procgen maze agent's ``torso.hook_fc``, 8192 for its ``torso.block1.res0.hook_out``), split into
episodes of ``--episode-length`` steps, and the target a noisy linear readout of them, so the probe
has something to find. Each line times, on the same data:

* ``probe``: :func:`proclab.interpret.probes.linear.cross_validated` (``--folds`` GroupKFold folds,
  each choosing its penalty by as many inner folds over its episodes) plus the episode-bootstrap of its
  score (``--bootstrap`` resamples);
* ``controls``: the shuffled-label probe and the constant baseline (the random-agent control costs
  one more probe, as ``probe``, plus replaying that agent);
* ``baseline``: one ordinary least-squares fit of all states (``numpy.linalg.lstsq``), the floor any
  linear probe pays; ``ratio`` is probe over baseline.

Replaying the agent for the activations is not included (that is ``analyze hidden --hook``'s cost).

    python benchmarks/probe_cost.py --steps 100000 --width 256
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from proclab.interpret.probes.linear import (
    EpisodeSums,
    constant_predictions,
    cross_validated,
    scored,
    shuffled_labels,
)


def data(steps: int, width: int, length: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(steps, 16)) @ rng.normal(size=(16, width))).astype(np.float32)
    x += 0.1 * rng.normal(size=x.shape).astype(np.float32)
    y = x[:, :4].sum(1) + rng.normal(size=steps)
    return x, y.astype(np.float64), np.arange(steps) // length


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--episode-length", type=int, default=100)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args()
    x, y, episode = data(args.steps, args.width, args.episode_length)
    _, baseline = timed(lambda: np.linalg.lstsq(np.c_[x, np.ones(len(x))], y, rcond=None))

    def probe():
        pred = cross_validated(x, y, episode, "ridge", args.folds)
        return scored({"probe": EpisodeSums.of(y, pred, episode, "ridge")}, args.bootstrap, 0)

    result, t_probe = timed(probe)

    def controls():
        control = shuffled_labels(y, episode, 0)
        cross_validated(x, control, episode, "ridge", args.folds)
        constant_predictions(y, episode, "ridge", args.folds)

    _, t_controls = timed(controls)
    print(
        json.dumps(
            {
                "benchmark": "probe_cost",
                "steps": args.steps,
                "width": args.width,
                "episodes": int(episode.max()) + 1,
                "folds": args.folds,
                "r2": round(result["probe"]["score"], 4),
                "probe_seconds": round(t_probe, 3),
                "controls_seconds": round(t_controls, 3),
                "baseline_lstsq_seconds": round(baseline, 3),
                "ratio": round(t_probe / baseline, 2),
                "load_average": os.getloadavg()[0],
                "threads": os.environ.get("OMP_NUM_THREADS", "default"),
            }
        )
    )


if __name__ == "__main__":
    main()
