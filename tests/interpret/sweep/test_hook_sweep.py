"""Feed-forward agents get the sweep and the atlas: a basis fitted at a hook point (torso.hook_fc) is
held at that hook on every forward pass."""

import json

import numpy as np
import torch

from proclab.cli import main
from proclab.interpret.bases.coordinates import LinearCoordinates
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.models import AgentConfig, build_agent
from proclab.models.hooks import capture
from support import TINY_AGENT, held_agent, hold

THREADS = ["--torch-threads", "1"]


def test_hook_hold_against_hold_on_the_captured_activation():
    torch.manual_seed(0)
    agent = build_agent(AgentConfig(core="none", **TINY_AGENT)).eval()
    x = np.random.default_rng(0).normal(size=(300, 32))
    coords = LinearCoordinates(Basis.fit(x, BasisConfig(n_ics=4), {}), "ica")
    obs = torch.randint(0, 256, (3, 3, 64, 64), dtype=torch.uint8)
    first = torch.ones(3, dtype=torch.bool)
    dims, values = torch.tensor([2, -1, 0]), torch.tensor([1.5, 0.0, -0.7])
    with torch.no_grad():
        with capture(agent, "torso.hook_fc", detach=True) as acts:
            plain, _ = agent.step(obs, {}, first)
        want = hold(coords, acts["torso.hook_fc"].double(), dims, values.double())
        held = held_agent(agent, coords, "hook:torso.hook_fc", dims, values)
        got, _, inner = held.run_with_cache(
            obs, {}, ["torso.hook_fc"], first
        )  # the cache sees the edited value
    np.testing.assert_allclose(inner["torso.hook_fc"][0].double().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    assert torch.equal(got.logits[1], plain.logits[1])  # dims -1: the plain agent, bit for bit
    assert not torch.equal(got.logits[0], plain.logits[0])
    with torch.no_grad():
        none, _ = held_agent(agent, coords, "hook:torso.hook_fc", torch.tensor([-1, -1, -1]), values).step(
            obs, {}, first
        )
    assert torch.equal(none.logits, plain.logits)


def test_feed_forward_sweep_and_atlas(ff_store, tmp_path):
    out = tmp_path / "A"
    main(
        [
            "analyze",
            "hidden",
            "--data",
            str(ff_store),
            "--hook",
            "torso.hook_fc",
            "--out",
            str(out),
            "--preset",
            "small",
            "--n-ics",
            "3",
            "--clusters",
            "3",
            "--no-plots",
        ]
    )
    main(
        [
            "analyze",
            "sweep",
            "--out",
            str(out),
            "--levels",
            "3",
            "--arms",
            "mean,p95",
            "--split",
            "0:50",
            "--rows",
            "6",
            "--bootstrap",
            "100",
            "--permutations",
            "100",
            *THREADS,
        ]
    )
    sweep = json.loads((out / "sweep" / "sweep.json").read_text())
    assert sweep["state"] == "hook:torso.hook_fc"
    assert {(r["direction"], r["arm"]) for r in sweep["results"]} == {
        (m, a) for m in range(3) for a in ("mean", "p95")
    }
    main(["analyze", "atlas", "--out", str(out), "--preset", "small", *THREADS])
    atlas = json.loads((out / "atlas" / "atlas.json").read_text())
    assert atlas["activation"] == "hook:torso.hook_fc" and atlas["sweep"]["arms"] == ["mean", "p95"]
    assert "sweep" in atlas["sweep_note"]
    assert {"gt agent_x", "gt agent_y"} <= set(atlas["quantities"])  # ground truth as tracked quantities
