"""Panel test fixtures. A synthetic panel that follows the schema: any number of samples, made in seconds.

It stands in for a real analysis where only the page is under test (its controls, its
filter counts, its time-to-interactive at 1000 and 6000 samples). Strip images come from a
small pool shared by many samples: the page loads only the strips of the sample on screen,
so the pool changes nothing the page does, and writing 6000 x 4 PNGs would only slow tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from proclab.envs import EnvConfig
from proclab.panel.bundle import PanelData, extrema, histograms, rounded, write_panel
from support import TINY_GRU, agent_checkpoint, write_samples

T, K, P, FS = 10, 16, 16, 64
TARGETS = ("value", "action", "ic:0", "ic:1")
ACTIONS = [
    "down-left",
    "left",
    "up-left",
    "down",
    "noop",
    "up",
    "down-right",
    "right",
    "up-right",
    "d",
    "a",
    "w",
    "s",
    "q",
    "e",
]


def _strip(rng: np.random.Generator, saliency: bool) -> np.ndarray:
    """T frames side by side: a moving square on a coloured ground, or blue/red blobs for a map."""
    img = np.zeros((FS, FS * T, 3), np.uint8)
    yy, xx = np.mgrid[:FS, :FS]
    for t in range(T):
        frame = img[:, t * FS : (t + 1) * FS]
        if saliency:
            cy, cx = rng.integers(8, FS - 8, 2)
            blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 60.0)
            frame[..., 2] = (255 * blob).astype(np.uint8)
            frame[..., 0] = (255 * np.roll(blob, 20, axis=1)).astype(np.uint8)
        else:
            frame[:] = rng.integers(40, 200, 3, dtype=np.uint8)
            y, x = 4 + 4 * t % (FS - 16), 4 + 5 * t % (FS - 16)
            frame[y : y + 12, x : x + 12] = (250, 220, 30)
    return img


def _truth(rng: np.random.Generator) -> dict:
    """Ground-truth markers of a real window: the agent at the frame's centre, a goal wandering in view
    (absent at step 0), a saw outside the frame."""
    goal = rng.uniform(8, 56, (T, 2)).round(2)
    return {
        "names": ["agent", "goal", "saw"],
        "x": [[32.0, None if t == 0 else float(goal[t, 0]), 80.0] for t in range(T)],
        "y": [[32.0, None if t == 0 else float(goal[t, 1]), 10.0] for t in range(T)],
    }


def synthetic_panel(
    out: Path, n_samples: int, n_real: int = 5, seed: int = 0, chunk: int = 500, atlas_cards: int = 0
) -> Path:
    rng = np.random.default_rng(seed)
    n = n_samples + n_real
    ics = rng.standard_normal((n, T, K)).cumsum(axis=1).astype(np.float32) / 2
    pcs = rng.standard_normal((n, T, P)).astype(np.float32)
    arrays = {"ics": ics, "pcs": pcs}
    for i, target in enumerate(TARGETS):
        g = rng.standard_normal((n, T, K)).astype(np.float32) * (i + 1) / 4
        if target.startswith("ic:"):
            g[n_samples:] = np.nan  # real episodes: agent-alone saliency has no IC gradients here
        arrays[f"grad:{target}"] = g
    pool = 6
    strips = {f"pool{j}_obs.png": _strip(rng, False) for j in range(pool)}
    strips |= {f"pool{j}_{t.replace(':', '')}.png": _strip(rng, True) for j in range(pool) for t in TARGETS}
    behaviour = rng.integers(0, 6, n)
    samples = []
    for i in range(n):
        real = i >= n_samples
        j = i % pool
        names = {"obs": f"strips/pool{j}_obs.png"}
        names |= {t: f"strips/pool{j}_{t.replace(':', '')}.png" for t in (TARGETS[:2] if real else TARGETS)}
        samples.append(
            {
                "name": f"episode {i - n_samples}" if real else f"sample {i}",
                "kind": "real" if real else "sample",
                "behaviour": None if real else int(behaviour[i]),
                "actions": rng.integers(0, 15, T).tolist(),
                "values": rounded(rng.uniform(0, 10, T)),
                "rewards": [0.0] * (T - 1) + [float(rng.integers(0, 2) * 10)],
                "strips": names,
                **({"truth": _truth(rng)} if real else {}),
            }
        )
    behaviours = [
        {"id": b, "name": f"behaviour {b}", "members": np.flatnonzero(behaviour[:n_samples] == b).tolist()}
        for b in range(6)
    ]
    doc = {
        "meta": {
            "title": f"synthetic panel ({n_samples} samples)",
            "created": "2026-01-01T00:00:00",
            "source": "synthetic",
            "n_ics": K,
            "n_pcs": P,
            "steps": T,
            "saliency_step": 4,
            "frame_size": FS,
            "actions": ACTIONS,
            "targets": list(TARGETS),
        },
        "background": {
            "ics": rounded(rng.standard_normal((2000, K))),
            "pcs": rounded(rng.standard_normal((2000, P))),
        },
        "samples": samples,
        "behaviours": behaviours,
        "extrema": {"fraction": 0.01, "any_step": extrema(ics), "saliency_step": extrema(ics, [4])},
        "histograms": histograms(ics),
        "training": {
            "metric": "charts/episodic_return",
            "steps": list(range(0, 50_000, 1000)),
            "values": rounded(np.linspace(0, 9, 50) + rng.normal(0, 0.5, 50)),
        },
        "eval": [
            {"split": "train", "episodes": 100, "return": 8.1},
            {"split": "test", "episodes": 100, "return": 6.4},
        ],
        "interventions": [{"name": "collapse IC 3", "summary": {"return_change": -1.5}, "video": None}],
    }
    if atlas_cards:
        doc["atlases"] = [synthetic_atlas(rng, atlas_cards, n, pool)]
    return write_panel(out, PanelData(doc, arrays, strips), chunk=chunk)


@pytest.fixture
def make_synthetic_panel():
    """:func:`synthetic_panel` for tests (conftest helpers are not importable by name)."""
    return synthetic_panel


K_TINY = 6


def tiny_analysis(root: Path) -> Path:
    """A small analysis folder laid out as the analyze commands write it: real and sample stores, a
    basis, two simulated saliency runs (the first with both env-grads settings for sample 0), a --real
    saliency run,
    behaviours, and an agent run directory with metrics.csv and an eval file."""
    from proclab.interpret.bases.activations import read_activation
    from proclab.interpret.bases.pca_ica import Basis, BasisConfig
    from proclab.interpret.workspace.folder import Workspace
    from proclab.store import EpisodeStore, ShardWriter

    rng = np.random.default_rng(3)
    data = write_samples(root / "DATA", n=12, steps=30, seed=1)
    samples = write_samples(root / "SAMPLES", n=40, steps=10, seed=2)
    run = root / "run"
    checkpoint = agent_checkpoint(
        run, TINY_GRU, EnvConfig(game=("bossfight",), num_envs=2)
    )  # replayed by atlas
    (run / "metrics.csv").write_text(
        "step,wall_time,charts/episodic_return\n1024,1.0,\n2048,2.0,3.5\n4096,3.0,6.25\n"
    )
    rows = [
        {
            "split": s,
            "game": "bossfight",
            "episodes": 20,
            "return_mean": r,
            "return_std": 1.0,
            "return_sem": 0.2,
            "length_mean": 300.0,
            "level_complete_rate": 0.4,
            "normalized_score": 0.3,
        }
        for s, r in (("train", 5.0), ("test1", 4.0))
    ]
    (run / "eval_test.json").write_text(json.dumps({"mode": "easy", "rows": rows, "aggregate": {}}))
    ws = Workspace.open(root / "A")
    source = "state_out/core.0.h"
    ws.require_inputs(data=data, samples=samples, activation=source, checkpoint=checkpoint)
    x = read_activation(EpisodeStore(data), source).x
    ws.record_command("hidden", {}, [], 0.0)
    Basis.fit(x, BasisConfig(n_ics=K_TINY), {"test": True}).save(ws.basis_path)

    sim = EpisodeStore(samples)
    with ShardWriter(
        root / "A" / "saliency" / "store.zarr",
        attrs={"saliency": {"samples": str(samples), "step": 4}},
        commit_seconds=0,
    ) as w:
        for i, env_grads in [(0, False), *((i, True) for i in range(24))]:
            got = sim.read(i, ["obs", "action", "value"])
            steps = {
                **got,
                **{
                    f"grad/{k}/{p}": rng.normal(
                        size=(10, 3, 64, 64) if p == "frame" else (10, K_TINY)
                    ).astype(np.float32)
                    for k in ("value", "action")
                    for p in ("frame", "ic")
                },
            }
            w.append(steps, {"sample": i, "env_grads": env_grads, "target_step": 4})
    with ShardWriter(
        root / "A" / "saliency-ic" / "store.zarr",
        attrs={"saliency": {"samples": str(samples), "step": 4}},
        commit_seconds=0,
    ) as w:
        for i in range(10):  # a second run (as xcorr's): a new target, and one the first run has too
            got = sim.read(i, ["obs", "action", "value"])
            steps = {
                **got,
                **{
                    f"grad/{k}/{p}": rng.normal(
                        size=(10, 3, 64, 64) if p == "frame" else (10, K_TINY)
                    ).astype(np.float32)
                    for k in ("ic_0", "value")
                    for p in ("frame", "ic")
                },
            }
            w.append(steps, {"sample": i, "env_grads": True, "target_step": 4})
    real = EpisodeStore(data)
    with ShardWriter(
        root / "A" / "saliency-real" / "store.zarr",
        attrs={"saliency": {"data": str(data), "step": 4, "window": 10}},
        commit_seconds=0,
    ) as w:
        for e in range(5):
            got = real.read(e, ["obs", "action"], 3, 13)
            steps = {**got, "grad/value/frame": rng.normal(size=(10, 3, 64, 64)).astype(np.float32)}
            w.append(steps, {"episode": e, "offset": 3, "target_step": 4})
    (root / "A" / "behaviours").mkdir()
    np.savez(root / "A" / "behaviours" / "labels.npz", ids=np.arange(40), labels=np.arange(40) % 3)
    return root / "A"


@pytest.fixture(scope="session")
def analysis(tmp_path_factory) -> Path:
    return tiny_analysis(tmp_path_factory.mktemp("analysis"))


@pytest.fixture(scope="session")
def atlas_analysis(analysis, tmp_path_factory) -> Path:
    """A copy of the small analysis folder with an ICA atlas of the real store (no sweep: "sweep not run")."""
    import shutil

    from proclab.cli import main

    out = tmp_path_factory.mktemp("atlas-analysis") / "A"
    shutil.copytree(analysis, out)
    flags = [
        "--bootstrap",
        "50",
        "--saliency-moments",
        "2",
        "--noise",
        "1",
        "--moments",
        "2",
        "--torch-threads",
        "1",
    ]
    main(["analyze", "atlas", "--out", str(out), *flags])
    return out


def synthetic_atlas(rng: np.random.Generator, n_cards: int, samples: int, pool: int) -> dict:
    """An atlas section of ``n_cards`` cards that follows the schema (random keys, some unmeasured) and the
    strips it names (from a small pool, as the samples' strips)."""
    quantities = ["value", "reward", "action up-right", "progress"]
    arms = ["mean", "p95", "collapse"]
    cards, rows = [], []
    for m in range(n_cards):
        swept = m % 5 != 4
        keys = {
            k: (None if not swept else float(rng.uniform(0, 1)))
            for k in ("effect:level_complete", "effect:return", "effect:length", "effect:tv_distance")
        }
        keys |= {"activity": float(rng.uniform(0, 0.3)), "kurtosis": float(rng.normal(3, 2))}
        keys |= {
            f"track:{q}": (float(abs(rng.normal(0, 0.3))) if (m + i) % 7 else None)
            for i, q in enumerate(quantities)
        }
        tracked = [q for q in quantities if rng.uniform() < 0.4]
        summary = f"{'mean-ablation: completion -0.1 [-0.2, -0.05]' if swept else 'sweep not run'}; tracks {tracked[0] if tracked else 'none'}"
        arm_rows = []
        for a in arms if swept else []:
            metric = lambda: [*np.round(sorted(rng.normal(0, 1, 3)), 3).tolist(), bool(rng.uniform() < 0.3)]  # noqa: E731
            row = {
                "id": f"sweep-ica-{m}-{a}",
                "label": f"IC {m}",
                "direction": m,
                "arm": a,
                "held": 0.5,
                "percentile": 50.0,
                "off_data": a == "collapse",
                "metrics": {k: metric() for k in ("level_complete", "return", "length", "tv_distance")},
            }
            rows.append(row)
            arm_rows.append(
                {k: row[k] for k in ("arm", "held", "percentile", "off_data", "metrics")} | {"row": row["id"]}
            )
        cards.append(
            {
                "direction": m,
                "label": f"IC {m}",
                "summary": summary,
                "text": " | ".join([f"IC {m}", summary, *tracked]).lower(),
                "keys": keys,
                "activity": {
                    "active": keys["activity"],
                    "rule": "more than 2 std from the median",
                    "kurtosis": keys["kurtosis"],
                    "progress": {
                        "edges": np.linspace(0, 1, 11).round(4).tolist(),
                        "active": rng.integers(0, 9, 10).tolist(),
                        "all": [20] * 10,
                    },
                },
                "tracks": [
                    {
                        "quantity": q,
                        "r0": 0.3,
                        "ci0": [0.2, 0.4],
                        "tracked": q in tracked,
                        "peak": {"lag": 3, "r": 0.5, "ci": [0.4, 0.6], "claimed": True},
                        "r": np.round(np.sin(np.arange(-8, 9) / 3) / 2, 3).tolist(),
                    }
                    for q in quantities[:2]
                ],
                "causes": {
                    "swept": swept,
                    "note": "sweep of 20 paired levels" if swept else "sweep not run",
                    "significant": swept and m % 3 == 0,
                    "significant_off_data_only": False,
                    "arms": arm_rows,
                },
                "moments": [
                    {
                        "side": side,
                        "episode": m,
                        "step": 4,
                        "value": 1.5,
                        "strip": f"strips/pool{m % pool}_obs.png",
                        "sample": (m * 7 + j) % samples,
                        "sample_step": j + 2,
                    }
                    for j, side in enumerate(("top", "bottom"))
                ],
                "saliency": f"strips/pool{m % pool}_value.png",
            }
        )
    sorts = [[k, k] for k in cards[0]["keys"]]
    atlas = {
        "basis": "ica",
        "label": "IC",
        "k": n_cards,
        "episodes": 100,
        "steps": 5000,
        "variance_explained": 0.8,
        "basis_fit": None,
        "counts": {
            "directions": n_cards,
            "swept": sum(c["causes"]["swept"] for c in cards),
            "significant": sum(c["causes"]["significant"] for c in cards),
            "significant_off_data_only": 0,
        },
        "sweep_note": "sweep of 20 paired levels",
        "prediction": ["value: FAILS, gradients do not rank ..."],
        "lags": list(range(-8, 9)),
        "sorts": sorts,
        "cards": cards,
        "sweep_rows": rows,
    }
    return atlas
