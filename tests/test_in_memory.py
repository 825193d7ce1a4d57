"""The probe, the steering, the sweep, the hidden-state analysis, saliency, the atlas and behaviours run on an
agent whose weights were edited in memory and never saved, and what they report is that edited agent's
behaviour (each check fails if the plain agent were used)."""

import copy
import os

import numpy as np
import pytest
import torch

import proclab
from proclab.envs import EnvConfig
from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore
from support import TINY_GRU, write_samples

SMALL = dict(bootstrap=20)


@pytest.fixture(scope="module")
def agents():
    torch.manual_seed(3)
    plain = proclab.build_agent(TINY_GRU).eval()
    # bigfish: an untrained agent's episodes last about 80 steps there (about 700 in CoinRun)
    plain.env_config = EnvConfig(game=("bigfish",), mode="easy", split="train")
    plain.runtime = make_runtime("cpu", "fp32")
    return plain


def edited(plain, edit, game: str | None = None):
    agent = copy.deepcopy(plain)
    agent.env_config, agent.runtime = plain.env_config, plain.runtime
    if game is not None:
        agent.env_config = EnvConfig(game=(game,), mode="easy", split="train")
    with torch.no_grad():
        edit(agent)
    return agent


def test_the_probe_reads_the_edited_agent(agents, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blind = edited(
        agents, lambda a: (a.torso.fc.weight.zero_(), a.torso.fc.bias.zero_()), "coinrun"
    )  # fc output all zero; CoinRun, whose agent_x the plain agent's fc encodes even untrained
    ro = proclab.rollout(
        blind, levels="test1", episodes=4, num_envs=4, seed=0, cache=["torso.hook_fc"], truth=True
    )
    assert not ro.cache["torso.hook_fc"].any()
    settings = proclab.analyze.ProbeSettings(targets=("agent_x",), folds=2, **SMALL)
    res = proclab.analyze.probe(ro, "torso.hook_fc", settings=settings).probes["agent_x"]
    # constant features: the probe predicts each fold's mean, exactly what the constant control predicts
    assert res["probe"]["score"] == pytest.approx(res["constant"]["score"], abs=1e-9)
    plain = proclab.analyze.probe(
        ro, "torso.hook_fc", agent=edited(agents, lambda a: None, "coinrun"), settings=settings
    )
    assert plain.probes["agent_x"]["probe"]["score"] > res["probe"]["score"] + 0.05  # the plain agent's fc
    assert os.listdir(tmp_path) == []  # nothing saved: no checkpoint, no random agent on disk


def test_steering_builds_its_vector_from_the_edited_agent(agents, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def zero_block1(a):
        for p in a.torso.block1.parameters():
            p.zero_()

    settings = proclab.analyze.SteerSettings(
        levels=4, vector_levels="0:4", coefficients=(0.0,), rows=8, **SMALL
    )
    hook = "torso.block1.hook_out"
    res = proclab.analyze.steer(
        edited(agents, zero_block1, "maze"), hook, settings=settings
    )  # cheese in view
    plain = proclab.analyze.steer(edited(agents, lambda a: None, "maze"), hook, settings=settings)
    assert res.vector_info["norm"] == 0 and not res.vector.any()  # the edited map is zero on every frame
    assert plain.vector_info["norm"] > 0
    assert os.listdir(tmp_path) == []


def test_the_sweep_plays_the_edited_agent(agents, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ro = proclab.rollout(agents, levels="0:20", episodes=4, num_envs=4, seed=1, truth=True)
    basis = proclab.analyze.fit_basis(ro, "core.0.hook_h", settings=proclab.analyze.BasisSettings(n_ics=3))

    def constant_policy(a):
        a.heads.policy.weight.zero_()
        a.heads.policy.bias.copy_(torch.arange(15, dtype=torch.float32))  # always action 14

    settings = proclab.analyze.SweepSettings(
        levels=3, arms="p05,p95", permutations=50, rows=16, directions="0:2", **SMALL
    )
    options = dict(basis=basis, rollout=ro, settings=settings)
    res = proclab.analyze.sweep(edited(agents, constant_policy), "core.0.hook_h", **options)
    plain = proclab.analyze.sweep(agents, "core.0.hook_h", **options)
    assert len(res.summary["results"]) == 4
    for r in res.summary["results"]:  # no edit of the state can change a policy that ignores it
        assert r["tv_distance"]["value"] == 0 and r["return"]["change"] == 0
    assert (np.asarray(res.outcomes["actions"])[..., 14] == np.asarray(res.outcomes["length"])).all()
    assert any(r["tv_distance"]["value"] > 0 for r in plain.summary["results"])
    assert os.listdir(tmp_path) == []


def blind_units(agent):
    """The first 8 units of the torso's output always zero."""
    agent.torso.fc.weight[:8].zero_()
    agent.torso.fc.bias[:8].zero_()


def test_the_hidden_states_are_the_edited_agents(agents, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = proclab.analyze.HiddenSettings(n_ics=3, clusters=3, nmf=2, perplexity=5.0, fit_points=300)
    std = {}
    for name, agent in (("blind", edited(agents, blind_units)), ("plain", agents)):
        ro = proclab.rollout(
            agent, levels="test1", episodes=2, num_envs=2, seed=0, cache=["torso.hook_fc"], truth=True
        )
        std[name] = proclab.analyze.hidden(ro, "torso.hook_fc", settings=settings).basis.std
    assert (std["blind"][:8] == 1).all()  # units that never vary keep a std of 1
    assert (std["plain"][:8] != 1).any()
    assert os.listdir(tmp_path) == []


def test_saliency_differentiates_the_edited_agent(agents, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def no_value(a):
        a.heads.value.weight.zero_()

    settings = proclab.analyze.SaliencySettings(window=3, step=2, targets=("value", "action"))
    grads = {}
    for name, agent in (("edited", edited(agents, no_value)), ("plain", agents)):
        ro = proclab.rollout(agent, levels="test1", episodes=2, num_envs=2, seed=0, truth=True)
        grads[name] = proclab.analyze.saliency(agent, rollout=ro, settings=settings).grads
    assert not grads["edited"]["value"].any() and grads["edited"]["action"].any()  # a constant value
    assert grads["plain"]["value"].any()
    assert os.listdir(tmp_path) == []


def test_behaviours_replay_the_edited_agent_on_the_samples(agents, tmp_path, tmp_path_factory, monkeypatch):
    samples = EpisodeStore(write_samples(tmp_path_factory.mktemp("samples") / "SAMPLES"))  # bossfight
    monkeypatch.chdir(tmp_path)
    settings = proclab.analyze.BehaviourSettings(clusters=3, pcs=8, perplexity=5.0, stability=False)
    means = {}
    for name, edit in (("blind", blind_units), ("plain", lambda a: None)):
        agent = edited(agents, edit, "bossfight")
        res = proclab.analyze.behaviours(samples, "torso.hook_fc", agent=agent, settings=settings)
        means[name] = res.model.a["mean"][:8]  # the features' mean over the replayed torso output's units
    assert not means["blind"].any() and means["plain"].any()
    assert os.listdir(tmp_path) == []


def test_the_atlas_looks_through_the_edited_agent(agents, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def blind(a):  # the core sees no frame: its state follows the step alone
        a.torso.fc.weight.zero_()
        a.torso.fc.bias.zero_()

    settings = proclab.analyze.AtlasSettings(
        bootstrap=20, moments=1, saliency_moments=2, noise=0, stability_seeds=0, stability_bootstraps=0
    )
    gradients = {}
    for name, agent in (("blind", edited(agents, blind)), ("plain", agents)):
        ro = proclab.rollout(agent, levels="0:20", episodes=2, num_envs=2, seed=1)
        basis = proclab.analyze.fit_basis(
            ro, "core.0.hook_h", settings=proclab.analyze.BasisSettings(n_ics=2)
        )
        res = proclab.analyze.atlas(agent, "core.0.hook_h", basis=basis, rollout=ro, settings=settings)
        gradients[name] = np.stack(list(res.gradients.values()))
    assert not gradients["blind"].any() and gradients["plain"].any()  # saliency of the agent given
    assert os.listdir(tmp_path) == []
