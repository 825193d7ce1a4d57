"""The PPO run's layout: timed on the run's own agent without touching it, printed, recorded, kept on resume."""

import dataclasses
import json

import pytest
import torch

import proclab.rl.ppo_layout as ppo_layout
from proclab.command import parse_args
from proclab.io.configs import from_dict
from proclab.models import build_agent
from proclab.rl.config import TrainConfig
from proclab.rl.ppo_layout import learner_candidates, measure_layouts
from proclab.rl.ppo_train import Trainer
from proclab.run.layout import Layout, Timings
from proclab.run.runtime import make_runtime
from support import TINY_FLAGS, TINY_PPO

TINY = [*TINY_PPO, "--val-num-envs", "0", "--device", "cpu", *TINY_FLAGS, "--total-steps", "256"]


def test_candidates_are_pieces_smaller_than_the_minibatch_then_the_whole():
    assert learner_candidates(2048, 2, recurrent=False) == [
        (64, "workers"),
        (64, "intra"),
        (128, "workers"),
        (128, "intra"),
        (256, "workers"),
        (256, "intra"),
        (0, "intra"),
    ]
    assert learner_candidates(2048, 1, recurrent=False) == [
        (64, "intra"),
        (128, "intra"),
        (256, "intra"),
        (0, "intra"),
    ]
    assert learner_candidates(100, 2, recurrent=False) == [(64, "intra"), (0, "intra")]
    assert learner_candidates(2048, 2, recurrent=True) == [(0, "intra")]  # sequences are replayed whole


def test_timing_leaves_the_agent_its_gradients_and_the_random_streams_alone():
    cfg, _ = parse_args([*TINY, "--num-steps", "64", "--num-minibatches", "1"])
    rt = make_runtime("cpu", "fp32", threads=2)
    torch.manual_seed(0)
    agent = rt.prepare(build_agent(cfg.agent))
    weights = [p.detach().clone() for p in agent.parameters()]
    rng = torch.get_rng_state()
    timings = measure_layouts(cfg, rt, agent, 256, envs=4, threads=2, recurrent=False, budget=float("inf"))
    assert set(timings.learner) == set(learner_candidates(256, 2, recurrent=False))
    assert set(timings.acting) == {"intra", "workers"}
    assert all(v > 0 for v in [*timings.learner.values(), *timings.acting.values()])
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(w, p) and p.grad is None for w, p in zip(weights, agent.parameters(), strict=True))
    hurried = measure_layouts(cfg, rt, agent, 256, envs=4, threads=2, recurrent=False, budget=0)
    assert set(hurried.learner) == set(timings.learner) - {(0, "intra")}  # the whole minibatch is left out


def test_close_contenders_are_timed_again_and_each_keeps_its_best(monkeypatch):
    """Planted timings whose first round ranks the schemes wrongly: acting workers and the learner's
    64:workers look fastest once, intra-op threads and 128:intra are fastest at their best."""
    acting_rounds = {"intra": [0.30, 0.20, 0.25], "workers": [0.22, 0.28, 0.27]}
    learner_rounds = {
        (64, "workers"): [1.00, 1.02],
        (64, "intra"): [1.10, 0.90],
        (128, "workers"): [2.00],  # out of contention: timed once
        (128, "intra"): [1.20, 0.85],
        (256, "workers"): [1.40],
        (256, "intra"): [1.30, 1.40],
        (0, "intra"): [3.00],
    }
    calls = {"acting": [], "learner": []}

    def acting(agent, rt, obs):
        scheme = "workers" if rt.acting_workers else "intra"
        calls["acting"].append(scheme)
        return acting_rounds[scheme][calls["acting"].count(scheme) - 1]

    def learner(agent, cfg, rt, mb, cutoff=float("inf")):
        key = (rt.compute_chunk, "workers" if rt.workers else "intra")
        calls["learner"].append(key)
        return learner_rounds[key][calls["learner"].count(key) - 1]

    monkeypatch.setattr(ppo_layout, "_acting_seconds", acting)
    monkeypatch.setattr(ppo_layout, "_learner_seconds", learner)
    cfg, _ = parse_args([*TINY, "--num-steps", "64", "--num-minibatches", "1"])
    rt = make_runtime("cpu", "fp32", threads=2)
    agent = rt.prepare(build_agent(cfg.agent))
    timings = measure_layouts(cfg, rt, agent, 2048, envs=4, threads=2, recurrent=False, budget=float("inf"))
    assert calls["acting"] == ["intra", "workers"] * ppo_layout.ROUNDS  # interleaved rounds
    assert timings.acting == {"intra": 0.20, "workers": 0.22}
    assert calls["learner"].count((128, "workers")) == calls["learner"].count((0, "intra")) == 1
    assert timings.learner[128, "intra"] == 0.85 and timings.learner[64, "workers"] == 1.00
    assert timings.fastest() == Layout(128, "intra", "intra")


def test_the_run_prints_and_records_its_layout_and_a_resumed_run_keeps_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # empty, whatever other tests cached
    planted = Timings({(0, "intra"): 1e-3, (64, "intra"): 2e-3}, {"intra": 1e-3})
    monkeypatch.setattr(ppo_layout, "measure_layouts", lambda *a, **k: planted)
    cfg, _ = parse_args([*TINY, "--checkpoint-every", "128", "--run-root", str(tmp_path)])
    trainer = Trainer(dataclasses.replace(cfg, ppo=dataclasses.replace(cfg.ppo, total_steps=128)))
    run = trainer.train(progress=False)
    assert "learner layout: whole:intra,acting:intra (measured in" in capsys.readouterr().out
    saved = json.loads((run / "config.json").read_text())
    assert saved["learner_layout"] == "whole:intra,acting:intra"

    def fail(*args, **kwargs):
        raise AssertionError("a resumed run timed its layout again")

    monkeypatch.setattr(ppo_layout, "measure_layouts", fail)
    cache = ppo_layout.LayoutCache()
    entries = json.loads(cache.path.read_text())
    for entry in entries["layouts"].values():  # a cache that now says otherwise
        entry["layout"] = "64:intra,acting:intra"
    cache.path.write_text(json.dumps(entries))
    resumed = Trainer(
        dataclasses.replace(from_dict(TrainConfig, saved), ppo=cfg.ppo), run_dir=run, resume=True
    )
    assert resumed.layout.layout == Layout() and resumed.layout.how == "given"
    assert (resumed.rt.compute_chunk, resumed.rt.workers) == (0, 0)
    resumed.train(progress=False)
    assert json.loads((run / "config.json").read_text())["learner_layout"] == "whole:intra,acting:intra"


@pytest.mark.parametrize("spec", ["64:intra,acting:workers", "128:workers"])
def test_a_given_layout_is_used_as_given(tmp_path, monkeypatch, spec):
    monkeypatch.setattr(ppo_layout, "measure_layouts", lambda *a, **k: pytest.fail("timed"))
    cfg, _ = parse_args([*TINY, "--learner-layout", spec, "--run-root", str(tmp_path)])
    trainer = Trainer(cfg)
    layout = Layout.parse(spec)
    assert trainer.layout.layout == layout and trainer.config.learner_layout == str(layout)
    threads = torch.get_num_threads()
    side = threads if threads > 1 else 0
    assert trainer.learner.rt.compute_chunk == layout.piece
    assert trainer.learner.rt.workers == (side if layout.learner == "workers" else 0)
    assert trainer.actor.rt.acting_workers == (side if layout.acting == "workers" else 0)


class _AskOnce:
    """A pace watch planted to say, after the second update, that the load has changed."""

    def __init__(self):
        self.seen = []

    def observe(self, seconds: float) -> bool:
        self.seen.append(seconds)
        return len(self.seen) == 2


def test_a_run_whose_pace_changed_times_again_and_goes_on_in_the_fastest_layout(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    quiet = Timings({(0, "intra"): 1e-3, (64, "intra"): 2e-3}, {"intra": 1e-3, "workers": 2e-3})
    loaded = Timings({(0, "intra"): 9e-3, (64, "workers"): 2e-3}, {"intra": 9e-3, "workers": 2e-3})
    timings = iter([quiet, loaded])
    monkeypatch.setattr(ppo_layout, "measure_layouts", lambda *a, **k: next(timings))
    monkeypatch.setattr("proclab.rl.ppo_train.PaceWatch", _AskOnce)
    cfg, _ = parse_args([*TINY, "--num-minibatches", "1", "--run-root", str(tmp_path)])
    batch = cfg.env.num_envs * cfg.ppo.num_steps
    trainer = Trainer(dataclasses.replace(cfg, ppo=dataclasses.replace(cfg.ppo, total_steps=4 * batch)))
    assert trainer.config.follow_load
    cache_before = ppo_layout.LayoutCache().path.read_text()
    run = trainer.train(progress=False)
    out = capsys.readouterr().out
    assert "the pace of updates changed: learner layout 64:workers,acting:workers (timed again in" in out
    assert "was whole:intra,acting:intra" in out
    threads = torch.get_num_threads()
    side = threads if threads > 1 else 0
    assert (trainer.rt.compute_chunk, trainer.rt.workers, trainer.rt.acting_workers) == (64, side, side)
    assert trainer.learner.rt is trainer.rt and trainer.actor.rt is trainer.rt
    assert len(trainer.actor.slices) == max(1, side)
    assert trainer.learner.updates == 4  # the run went on to its end
    config = json.loads((run / "config.json").read_text())
    assert config["learner_layout"] == "64:workers,acting:workers"  # a resume computes as the run ended
    (entry,) = [json.loads(line) for line in (run / "config_history.jsonl").read_text().splitlines()]
    assert entry["retimed_at_step"] == 2 * batch
    assert entry["changed"] == {"learner_layout": ["whole:intra,acting:intra", "64:workers,acting:workers"]}
    assert ppo_layout.LayoutCache().path.read_text() == cache_before  # the cache keeps the start's choice


def test_a_given_layout_does_not_follow_the_load(tmp_path, monkeypatch):
    monkeypatch.setattr(ppo_layout, "measure_layouts", lambda *a, **k: pytest.fail("timed"))
    cfg, _ = parse_args([*TINY, "--learner-layout", "64:intra", "--run-root", str(tmp_path)])
    trainer = Trainer(cfg)
    assert trainer.pace is None and not trainer.config.follow_load
    cfg, _ = parse_args([*TINY, "--no-follow-load", "--run-root", str(tmp_path)])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(
        ppo_layout, "measure_layouts", lambda *a, **k: Timings({(0, "intra"): 1.0}, {"intra": 1.0})
    )
    assert Trainer(cfg).pace is None
