"""proclab.analyze.atlas: on a rollout, the cards ``analyze atlas`` writes for the recording of the same agent,
levels and seed (one env slot: episodes in the same order), with the sweep's summary given as an object;
the pictures the cards name; one-line refusals."""

import json

import numpy as np
import pytest
from PIL import Image

import proclab
from proclab.cli import main
from proclab.errors import ProclabError
from proclab.interpret.atlas.build import Atlas, AtlasSettings, atlas
from proclab.interpret.atlas.command import plain
from proclab.interpret.bases.pca_ica import Basis
from proclab.models.loading import load
from support import make_agent_checkpoint, round_trip

THREADS = ["--device", "cpu", "--torch-threads", "1"]
HIDDEN = ["--n-ics", "3", "--clusters", "3", "--nmf", "2", "--perplexity", "5", "--fit-points", "300"]
SETTINGS = AtlasSettings(bootstrap=40, moments=2, saliency_moments=2, noise=0, predict_steps=40,
                         stability_seeds=1, stability_bootstraps=1, random_directions=2)  # fmt: skip
FLAGS = ["--bootstrap", "40", "--moments", "2", "--saliency-moments", "2", "--noise", "0", "--predict-steps", "40",
         "--stability-seeds", "1", "--stability-bootstraps", "1", "--random-directions", "2"]  # fmt: skip


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("atlas-function")
    checkpoint = make_agent_checkpoint(root / "run", game="bigfish")  # short episodes
    data, out = root / "DATA", root / "A"
    main(["record", "--agent", str(checkpoint), "--precision", "fp32", "--episodes", "3", "--num-envs", "1",
          "--out", str(data), *THREADS])  # fmt: skip
    main(["analyze", "hidden", "--data", str(data), "--out", str(out), *HIDDEN, "--no-plots"])
    sweep = [
        "--levels",
        "3",
        "--arms",
        "p05,p95",
        "--directions",
        "0:2",
        "--permutations",
        "50",
        "--rows",
        "8",
    ]
    main(["analyze", "sweep", "--out", str(out), *sweep, "--bootstrap", "40", *THREADS])
    main(["analyze", "atlas", "--out", str(out), *FLAGS, *THREADS, "--precision", "fp32"])
    agent = load(checkpoint, device="cpu", precision="fp32")
    return agent, proclab.rollout(agent, episodes=3, num_envs=1, seed=0, truth=True), out


def test_the_function_gives_the_cards_the_command_wrote(folder, tmp_path):
    agent, ro, out = folder
    sweep = json.loads((out / "sweep" / "sweep.json").read_text())
    res = proclab.analyze.atlas(
        agent,
        "core.0.hook_h",
        basis=Basis.load(out / "basis.npz"),
        rollout=ro,
        sweep=sweep,
        settings=SETTINGS,
    )
    written = json.loads((out / "atlas" / "atlas.json").read_text())
    assert {k: written[k] for k in res.summary()} == plain(res.summary())
    assert "points" in res.prediction and res.sweep_note == "sweep of 3 paired levels"
    arrays = np.load(out / "atlas" / "saliency.npz")
    assert list(arrays["directions"]) == sorted(res.gradients)
    np.testing.assert_array_equal(
        arrays["gradient"], np.array([res.gradients[m] for m in sorted(res.gradients)])
    )
    for name, image in res.images.items():  # every picture the cards name, pixel for pixel
        np.testing.assert_array_equal(np.asarray(Image.open(out / "atlas" / name)), image, err_msg=name)
    named = {mo["strip"] for c in res.cards for side in ("top", "bottom") for mo in c["activation"][side]}
    assert named | {c["saliency"]["image"] for c in res.cards if c["saliency"]} == set(res.images)
    assert isinstance(res, Atlas) and [r["direction"] for r in res.table()] == ["IC 0", "IC 1", "IC 2"]
    assert len(res.plot().axes) == 2  # one panel per pairing
    round_trip(res, tmp_path / "atlas")  # the pictures and gradients too


def test_without_a_sweep_the_cards_say_so(folder):
    agent, ro, out = folder
    settings = AtlasSettings(
        kind="pca", bootstrap=20, moments=1, saliency_moments=0, stability_seeds=0, stability_bootstraps=0
    )
    res = atlas(agent, "core.0.hook_h", basis=Basis.load(out / "basis.npz"), rollout=ro, settings=settings)
    assert (
        res.label == "PC"
        and res.k == 3
        and not res.images.keys()
        - {mo["strip"] for c in res.cards for mo in c["activation"]["top"] + c["activation"]["bottom"]}
    )
    assert all(c["causes"] == {"swept": False, "note": "sweep not run (none given)"} for c in res.cards)
    with pytest.raises(ProclabError, match="no prediction to draw"):
        res.plot()


@pytest.mark.parametrize(
    ("key", "settings", "message"),
    [
        ("core.0.hook_c", AtlasSettings(), "unknown recurrent state's hook point 'core.0.hook_c'"),
        ("core.0.h", AtlasSettings(), "'core.0.h' is a state key; name its hook point, 'core.0.hook_h'"),
        ("core.0.hook_h", AtlasSettings(bootstrap=0), "--bootstrap must be >= 1"),
        ("core.0.hook_h", AtlasSettings(moments=-1), "--moments must be >= 0"),
    ],
)
def test_mistakes_are_one_line(folder, key, settings, message):
    agent, ro, out = folder
    with pytest.raises(ProclabError, match=message):
        atlas(agent, key, basis=Basis.load(out / "basis.npz"), rollout=ro, settings=settings)
