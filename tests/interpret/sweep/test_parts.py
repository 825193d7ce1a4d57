"""A sweep played in parts: blocks played by separate calls (as separate processes would) give the same
outcomes and tests as the sweep in one part, a resumed sweep plays nothing already saved, blocks of another
sweep are refused, and the merged landing reservoirs weigh each block by the states it offered."""

import numpy as np
import pytest
import torch

from planted import KEY, Corridor, PlantedAgent, planted_recorded, recorded_states
from proclab.errors import ProclabError
from proclab.interpret.sweep.grid import SweepSettings, sweep
from proclab.interpret.sweep.landing import Reservoirs
from proclab.interpret.sweep.parts import Parts
from proclab.run.parts import blocks
from proclab.run.runtime import make_runtime

RT = make_runtime("cpu", "fp32", 1)
LEVELS = np.arange(3000, 3011)
FINGERPRINT = {"arms": "mean,p05,p95,p05@3", "seed": "4"}


def settings(**kw) -> SweepSettings:
    base = dict(
        levels=len(LEVELS), rows=48, permutations=300, bootstrap=200, arms="mean,p05,p95,p05@3",
        seed=4, greedy=False, landing=30,
    )  # fmt: skip
    return SweepSettings(**{**base, **kw})


class Unplayable(Corridor):
    """A corridor that fails the test if a level is ever started in it."""

    def load(self, slot, state):
        raise AssertionError("a saved block was played again")


def without_landing(results: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "landing"} for r in results]


def test_blocks_are_contiguous_and_cover_every_level():
    parts = blocks(11, 3)
    assert [len(b) for b in parts] == [4, 4, 3]
    np.testing.assert_array_equal(np.concatenate(parts), np.arange(11))
    with pytest.raises(ProclabError, match="--parts"):
        blocks(3, 4)


def test_a_sweep_in_parts_equals_the_sweep_in_one_and_resumes(tmp_path):
    coords, rec = planted_recorded()
    states = recorded_states()
    run = lambda config, env, store: sweep(  # noqa: E731
        PlantedAgent(), coords, KEY, rec, env, LEVELS, [0, 1, 2], config, RT, states=states, store=store
    )
    whole, out_whole, _ = run(settings(), Corridor(48), None)
    folder = tmp_path / "sweep-parts"
    for i in (3, 1):  # separate calls, in any order, each with its own store as a process would have
        assert run(settings(parts=3, part=i), Corridor(48), Parts(3, folder, FINGERPRINT)) is None
    ticks = []
    summary, out, _ = run(settings(parts=3, part=2), Corridor(48), Parts(3, folder, FINGERPRINT))
    for name in ("ret", "complete", "length", "actions", "timed_out"):
        np.testing.assert_array_equal(getattr(out, name), getattr(out_whole, name))
    assert without_landing(summary["results"]) == without_landing(whole["results"])
    assert summary["claims"] == whole["claims"] and summary["parts"] == 3
    for r in summary["results"]:
        assert 0 < r["landing"]["states"] <= 30
    # resumed with every block saved: nothing is played, the same results come back
    again, _, _ = sweep(
        PlantedAgent(), coords, KEY, rec, Unplayable(48), LEVELS, [0, 1, 2], settings(parts=3), RT,
        tick=ticks.append, states=states, store=Parts(3, folder, FINGERPRINT),
    )  # fmt: skip
    assert again["results"] == summary["results"] and sum(ticks) == out.ret.size


def test_blocks_of_another_sweep_are_refused(tmp_path):
    Parts(2, tmp_path / "p", FINGERPRINT)
    Parts(2, tmp_path / "p", dict(FINGERPRINT))  # the same sweep: accepted
    with pytest.raises(ProclabError, match="seed differ"):
        Parts(2, tmp_path / "p", {**FINGERPRINT, "seed": "5"})


def test_merged_reservoirs_weigh_each_block_by_what_it_offered():
    """Two blocks of one key: 100 and 300 states offered, 10 kept by each. A uniform sample of the 400
    offered states takes 3/4 of its states from the second block; the merge, repeated, does."""
    first, second = Reservoirs(10, np.random.default_rng(0)), Reservoirs(10, np.random.default_rng(1))
    for n, res, sign in ((100, first, 1.0), (300, second, -1.0)):
        for _ in range(n):
            res.offer((0, 1.0), torch.full((3,), sign))
    assert first.seen[(0, 1.0)] == 100 and len(second.kept[(0, 1.0)]) == 10
    shares = []
    for seed in range(400):
        merged = Reservoirs.merged([first, second], 10, np.random.default_rng(seed))
        kept = np.stack(merged.kept[(0, 1.0)])
        assert len(kept) == 10 and merged.seen[(0, 1.0)] == 400
        shares.append(np.mean(kept[:, 0] < 0))
    assert np.mean(shares) == pytest.approx(0.75, abs=0.02)
    roundtrip = Reservoirs.from_arrays(first.arrays(), 10, np.random.default_rng(0))
    assert roundtrip.seen == first.seen
    np.testing.assert_array_equal(np.stack(roundtrip.kept[(0, 1.0)]), np.stack(first.kept[(0, 1.0)]))
