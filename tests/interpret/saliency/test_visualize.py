"""analyze visualize: the target moves the asked way within 50 iterations, vectors stay unit-norm, runs repeat."""

import json

import numpy as np
import pytest
import torch

from proclab.cli import main as cli
from proclab.interpret.saliency.targets import parse_target
from proclab.interpret.saliency.visualize import Objective, OptimConfig, optimise, similarity, unit
from proclab.store import EpisodeStore

MARGIN = 0.02
"""How far 50 iterations must move the mean value of the tiny model's rollouts: more than the value's
spread over random vectors (its std is about 0.015 for this model)."""
LR = {"adam": 0.02, "seed": 1.0}


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("optimizer", [pytest.param("adam", marks=pytest.mark.heavy), "seed"])
def test_value_moves_the_asked_way_within_50_iterations(model, bottlenecks, sign, optimizer):
    wm, agent = model
    objective = Objective(wm, agent, parse_target("value")[0], 5, None, sign)
    config = OptimConfig(
        iterations=50, lr=LR[optimizer], optimizer=optimizer, diversity=0.01, temperature=1e-4
    )
    res = optimise(objective, bottlenecks, config, seed=0)
    gain = sign * (res.history[-1].mean() - res.history[0].mean())
    assert gain > MARGIN, gain
    torch.testing.assert_close(res.vectors.norm(dim=-1), torch.ones(3), rtol=0, atol=1e-6)


@pytest.mark.parametrize("optimizer", ["adam", "seed"])
def test_runs_repeat_given_the_seed(model, bottlenecks, optimizer):
    objective = Objective(model[0], model[1], parse_target("group:right")[0], 4, 2, 1.0)
    config = OptimConfig(iterations=4, lr=LR[optimizer], optimizer=optimizer, diversity=0.1, temperature=1.0)
    res, again = (optimise(objective, bottlenecks, config, seed=3) for _ in range(2))
    assert torch.equal(res.vectors, again.vectors) and np.array_equal(res.history, again.history)
    assert not torch.equal(res.vectors, torch.nn.functional.normalize(bottlenecks, dim=-1))


def test_objective_gradient_matches_finite_differences(model, bottlenecks):
    """Gradients reach the vector through every path, the predicted initial agent state included."""
    wm, agent = model
    objective = Objective(wm, agent, parse_target("value")[0], 5, None, 1.0)
    x = bottlenecks.clone().requires_grad_(True)
    with torch.enable_grad():
        (g,) = torch.autograd.grad(objective.target_of(objective.trace(unit(x))[1]).sum(), [x])
    d = g / g.norm(dim=-1, keepdim=True)
    eps = 1e-3
    with torch.no_grad():
        up, down = (objective.target_of(objective.trace(unit(x + s * eps * d))[1]) for s in (1, -1))
    torch.testing.assert_close((up - down) / (2 * eps), g.norm(dim=-1), rtol=2e-2, atol=1e-4)


def test_diversity_term_is_the_mean_cosine_to_the_others():
    b = torch.nn.functional.normalize(torch.randn(4, 6, generator=torch.Generator().manual_seed(0)), dim=-1)
    ref = [np.mean([float(b[i] @ b[j]) for j in range(4) if j != i]) for i in range(4)]
    np.testing.assert_allclose(similarity(b).numpy(), ref, rtol=1e-5)


def test_visualize_command(samples, tmp_path, capsys):
    out = tmp_path / "analysis"
    args = [
        "analyze",
        "visualize",
        "--out",
        str(out),
        "--samples",
        str(samples),
        "--minimize",
        "action:right",
        "--step",
        "2",
        "--n",
        "2",
        "--iterations",
        "3",
        "--videos",
        "1",
        "--torch-threads",
        "1",
    ]
    cli(args)
    assert "outputs in" in capsys.readouterr().out
    folder = out / "visualize" / "min_action_right"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["vectors"] == 2 and len(summary["final"]) == 2
    assert all(abs(x - 1) < 1e-5 for x in summary["norms"])
    store = EpisodeStore(folder / "samples.zarr")
    np.testing.assert_allclose(store.episodes["target_final"], summary["final"], rtol=1e-6)
    assert (folder / "videos" / "vector_000.mp4").is_file() and (folder / "target_vs_iteration.png").is_file()
    cli(args)  # a re-run replaces its outputs
    assert EpisodeStore(folder / "samples.zarr").num_episodes == 2
    with pytest.raises(SystemExit):
        cli(["analyze", "visualize", "--out", str(out), "--maximize", "ic:0-3"])
