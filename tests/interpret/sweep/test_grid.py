"""The intervention sweep: edit arms against a direct computation, batched paired play against episodes
played one by one, the planted agent's known effects found exactly, and a null agent's false positives
held at the nominal rate by the correction."""

import numpy as np
import pytest
import torch

from planted import KEY, UNITS, Corridor, PlantedAgent, recorded_states, unit_basis
from proclab.interpret.bases.coordinates import LinearCoordinates, hold
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.interventions import batched_play
from proclab.interpret.interventions.arms import Recorded, off_data_warning
from proclab.interpret.interventions.batched_play import play
from proclab.interpret.interventions.edited_agent import HeldAgent, IntervenedAgent, Intervention
from proclab.interpret.sweep.grid import SweepArgs, Variants, sweep
from proclab.interpret.sweep.stats import compare
from proclab.models import AgentConfig, build_agent
from proclab.run.runtime import make_runtime
from support import TINY_AGENT

D = 16
RT = make_runtime("cpu", "fp32", 1)


@pytest.fixture(scope="module")
def basis():
    x = np.random.default_rng(0).normal(size=(400, D)) @ np.random.default_rng(1).normal(size=(D, D)) * 0.3
    return Basis.fit(x, BasisConfig(n_ics=4), {"activation": "state_out/core.0.h"})


@pytest.mark.parametrize("kind", ["ica", "pca"])
def test_hold_sets_one_coordinate_and_keeps_everything_else(basis, kind):
    coords = LinearCoordinates(basis, kind)
    h = torch.from_numpy(np.random.default_rng(2).normal(size=(6, D)))
    dims = torch.tensor([0, 3, -1, 2, 1, -1])
    values = torch.tensor([5.0, -2.0, 9.0, 0.0, 0.5, 1.0], dtype=torch.float64)
    out = hold(coords, h, dims, values)
    d = basis.directions(kind)
    c = basis.to_coords(h.numpy(), kind)
    for r in range(6):
        if dims[r] < 0:
            assert torch.equal(out[r], h[r])  # untouched rows: bit for bit
            continue
        m = int(dims[r])
        direct = h[r].numpy() + (float(values[r]) - c[r, m]) * d[m]  # the edit, computed by hand
        np.testing.assert_allclose(out[r].numpy(), direct, rtol=0, atol=1e-12)
        new = basis.to_coords(out[r : r + 1].numpy(), kind)[0]
        assert new[m] == pytest.approx(float(values[r]), abs=1e-10)
        np.testing.assert_allclose(np.delete(new, m), np.delete(c[r], m), atol=1e-10)
        residual = lambda x, cx: x - cx @ d  # noqa: E731  (the part outside the k directions)
        np.testing.assert_allclose(residual(out[r].numpy(), new), residual(h[r].numpy(), c[r]), atol=1e-10)


def gru(core="gru"):
    torch.manual_seed(0)
    return build_agent(AgentConfig(core=core, rnn_size=D, **TINY_AGENT)).eval()


def frames(T=6, B=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    obs = torch.randint(0, 256, (T, B, 3, 64, 64), generator=g, dtype=torch.uint8)
    firsts = torch.zeros(T, B, dtype=torch.bool)
    firsts[0], firsts[3, 1] = True, True
    return obs, firsts


@pytest.mark.parametrize("core", ["gru", "lstm"])
def test_identity_edits_are_bit_exact(basis, core):
    coords = LinearCoordinates(basis, "ica")
    h = torch.randn(5, D)
    c = coords.encode(h)
    assert torch.equal(coords.write(h, c, c), h)
    agent = gru(core)
    obs, firsts = frames()
    none = HeldAgent(agent, coords, "core.0.h").plan(torch.full((3,), -1), torch.zeros(3))
    with torch.no_grad():
        plain, plain_state = agent.unroll(obs, agent.initial_state(3), firsts)
        held, held_state = none.unroll(obs, agent.initial_state(3), firsts)
    assert torch.equal(plain.logits, held.logits) and torch.equal(plain.value, held.value)
    assert all(torch.equal(plain_state[k], held_state[k]) for k in plain_state)


def test_collapse_arm_is_the_increment_collapse(basis):
    """Holding IC 2 at the start state's coordinate plays like --collapse 2 (every increment's IC 2 zeroed)."""
    agent, coords = gru(), LinearCoordinates(basis, "ica")
    start = coords.encode(torch.zeros(1, D))[0, 2]
    held = HeldAgent(agent, coords, "core.0.h").plan(torch.tensor(2), start)
    collapsed = IntervenedAgent(agent, basis, "ica", Intervention.parse("collapse", "2"), "core.0.h")
    obs, firsts = frames(seed=1)
    with torch.no_grad():
        a, sa = held.unroll(obs, agent.initial_state(3), firsts)
        b, sb = collapsed.unroll(obs, agent.initial_state(3), firsts)
        plain, _ = agent.unroll(obs, agent.initial_state(3), firsts)
    torch.testing.assert_close(a.logits, b.logits, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sa["core.0.h"], sb["core.0.h"], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(a.logits, plain.logits)


def test_arm_values_and_placement_against_numpy():
    rng = np.random.default_rng(3)
    values = rng.normal(size=(500, 3)) * [1, 5, 0.1] + [0, 10, -3]
    values[:50, 1] = 10.0  # ties
    rec = Recorded(values, np.array([0.0, -40.0, -3.0]))
    g = np.random.default_rng(0)
    assert rec.held("mean", 1, 4, g) == pytest.approx([values[:, 1].mean()] * 4)
    assert rec.held("p05", 0, 2, g) == pytest.approx([np.percentile(values[:, 0], 5)] * 2)
    assert rec.held("p95", 2, 2, g) == pytest.approx([np.percentile(values[:, 2], 95)] * 2)
    assert rec.held("collapse", 1, 3, g) == pytest.approx([-40.0] * 3)
    drawn = rec.held("resample", 1, 40, g)
    assert set(drawn) <= set(values[:, 1]) and len(set(drawn)) > 20
    for v in (10.0, -40.0, 12.5, 1e9):
        below = sum(x < v for x in values[:, 1]) + 0.5 * sum(x == v for x in values[:, 1])
        assert rec.percentile(1, v) == pytest.approx(100 * below / 500)
    place = {"collapse": rec.placement(1, [-40.0]), "mean": rec.placement(1, [values[:, 1].mean()])}
    assert place["collapse"]["off_data"] and place["collapse"]["percentile"] == 0
    assert not place["mean"]["off_data"] and 40 < place["mean"]["percentile"] < 60
    line = off_data_warning(place)
    assert "\n" not in line and "1 of 2 edits" in line and "collapse" in line
    assert off_data_warning({"mean": place["mean"]}) is None


def planted_recorded() -> tuple[LinearCoordinates, Recorded]:
    coords = LinearCoordinates(unit_basis(), "ica")
    states = torch.from_numpy(recorded_states()).double()
    return coords, Recorded(coords.encode(states).numpy(), np.zeros(len(UNITS)))


def one_by_one(agent, coords, levels, dims, values, greedy, seed):
    """The reference: every (variant, level) episode alone, in a fresh one-slot corridor."""
    V, L = values.shape
    ret, length, counts = np.zeros((V, L)), np.zeros((V, L)), np.zeros((V, L, 15), np.int64)
    for v in range(V):
        for lv in range(L):
            env, held = Corridor(1), HeldAgent(agent, coords, KEY)
            env.load(0, env.level_state(int(levels[lv])))
            held.plan(torch.tensor([dims[v]]), torch.tensor([values[v, lv]], dtype=torch.float32))
            state, first, t = agent.initial_state(1), torch.ones(1, dtype=torch.bool), 0
            while True:
                with torch.no_grad():
                    out, state = held.step(torch.from_numpy(env.observe()), state, first)
                logits = out.logits[0].numpy().astype(np.float64)
                if not greedy:
                    logits = logits + np.random.default_rng([seed, int(levels[lv]), t]).gumbel(size=15)
                a = int(logits.argmax())
                _, reward, terminated, truncated, _ = env.step(np.array([a]))
                ret[v, lv] += reward[0]
                counts[v, lv, a] += 1
                t += 1
                first = torch.zeros(1, dtype=torch.bool)
                if terminated[0] or truncated[0]:
                    length[v, lv] = t
                    break
    return ret, length, counts


@pytest.mark.parametrize("greedy", [True, False])
def test_batched_play_equals_episodes_played_one_by_one(greedy, monkeypatch):
    """13 slots for 42 episodes (slots refilled mid-level, idle at the end), forwards in pieces of 4 rows."""
    monkeypatch.setattr(batched_play, "CPU_CHUNK", 4)
    coords, rec = planted_recorded()
    levels = np.arange(500, 506)
    variants = Variants.of([1, 3], ("collapse", "mean", "resample"), rec, len(levels), seed=0)
    agent = PlantedAgent()
    out = play(
        HeldAgent(agent, coords, KEY),
        Corridor(13),
        levels,
        variants.direction,
        variants.values,
        RT,
        greedy=greedy,
        seed=4,
    )
    ret, length, counts = one_by_one(agent, coords, levels, variants.direction, variants.values, greedy, 4)
    np.testing.assert_array_equal(out.ret, ret)
    np.testing.assert_array_equal(out.length, length)
    np.testing.assert_array_equal(out.actions, counts)
    np.testing.assert_array_equal(out.complete, ret > 0)
    assert len(np.unique(out.ret)) > 1 and len(np.unique(out.length)) > 2  # the variants differ


SIGNIFICANT = {
    # (direction, arm) pairs whose change is significant after correction, by design of the planted agent
    "return": {(0, "collapse"), (1, "collapse"), (1, "p05"), (1, "resample")},
    "level_complete": {(0, "collapse"), (1, "collapse"), (1, "p05"), (1, "resample")},
    "length": {(0, "collapse"), (1, "collapse"), (1, "p05"), (1, "mean"), (1, "p95")},
    "tv_distance": {(0, "collapse"), (1, "collapse"), (1, "p05"), (1, "mean"), (1, "p95")}
    | {(3, "collapse"), (3, "mean"), (3, "p05"), (3, "p95")},
}
UNSURE = {
    # resample draws a value per level: its effect on length (longer when drive is held low, shorter when
    # high) and on the actions is real but its size depends on the draws; these are not asserted
    "length": {(1, "resample")},
    "tv_distance": {(1, "resample"), (3, "resample")},
}


@pytest.mark.parametrize("correction", ["holm", "bh"])
def test_sweep_finds_exactly_the_planted_effects(correction, tmp_path):
    coords, rec = planted_recorded()
    args = SweepArgs(
        out=tmp_path, levels=60, rows=128, permutations=2000, bootstrap=500, correction=correction
    )
    summary, _, _ = sweep(
        PlantedAgent(), coords, KEY, rec, Corridor(128), np.arange(2000, 2060), list(range(5)), args, RT
    )
    assert summary["baseline"]["level_complete"] == 1.0  # the plain agent completes every level
    results = {(r["direction"], r["arm"]): r for r in summary["results"]}
    for metric, expected in SIGNIFICANT.items():
        found = {pair for pair, r in results.items() if r[metric]["significant"]} - UNSURE.get(metric, set())
        assert found == expected, metric
    for direction in (2, 4):  # the null directions: not a single action changes
        for arm in ("collapse", "mean", "resample", "p05", "p95"):
            r = results[direction, arm]
            assert r["return"]["change"] == r["length"]["change"] == r["tv_distance"]["value"] == 0
            assert not any(a["significant"] for a in r["actions"].values())
    off = {pair for pair, r in results.items() if r["edit"]["off_data"]}
    assert off == {
        (0, "collapse"),
        (1, "collapse"),
        (3, "collapse"),
        (4, "collapse"),
    }  # position 0 is on data
    assert results[1, "p95"]["edit"]["percentile"] == pytest.approx(95, abs=1)
    assert summary["significant"]["collapse"] == [0, 1, 3] and summary["significant"]["mean"] == [1, 3]
    effects = [abs(r["return"]["change"]) for r in summary["results"]]
    assert effects == sorted(effects, reverse=True)
    assert summary["correction"]["method"] == correction and "IC 0 collapse" in summary["warning"]


NULL_ARMS = ("mean", "resample", "collapse")
NULL_DIRECTIONS = list(range(len(UNITS))) * 2  # each unit twice: ten independent tests per family


def null_run(seed: int, coords, rec) -> list[list[dict]]:
    """One sweep of the null agent: outcomes played once, tested with both corrections."""
    levels = np.arange(3000 + 40 * seed, 3000 + 40 * seed + 30)
    variants = Variants.of(NULL_DIRECTIONS, NULL_ARMS, rec, len(levels), seed)
    agent = HeldAgent(PlantedAgent(null=True, seed=seed), coords, KEY)
    env = Corridor(len(levels) * len(variants.arm))
    out = play(agent, env, levels, variants.direction, variants.values, RT, seed=seed)
    kw = dict(bootstrap=50, permutations=999, alpha=0.05, seed=seed)
    names = [str(a) for a in range(15)]
    return [compare(out, variants.arm, names, correction=c, **kw) for c in ("holm", "bh")]


@pytest.mark.parametrize("runs", [20, pytest.param(200, marks=pytest.mark.slow)])
def test_null_agent_false_positives_stay_at_or_below_nominal(runs):
    """No edit can change the null agent, but its episodes vary (its actions are random): over repeated
    sweeps, the share of (sweep, arm, metric) families with any significant direction must not exceed
    alpha = 0.05 beyond binomial noise (one-sided, 99 %), while uncorrected tests exceed it."""
    coords, rec = planted_recorded()
    metrics = ("return", "level_complete", "length", "tv_distance")
    families = {"holm": [], "bh": [], "raw": []}
    for seed in range(runs):
        for name, reports in zip(("holm", "bh"), null_run(seed, coords, rec), strict=True):
            for arm in range(len(NULL_ARMS)):
                members = reports[arm :: len(NULL_ARMS)]  # the ten directions of one arm
                for m in metrics:
                    families[name].append(any(r[m]["significant"] for r in members))
                    if name == "holm":
                        families["raw"].append(any(r[m]["p"] <= 0.05 for r in members))
    n = len(families["holm"])
    limit = 0.05 + 2.33 * np.sqrt(0.05 * 0.95 / n)
    rates = {k: float(np.mean(v)) for k, v in families.items()}
    print("false-positive rates", rates, "limit", limit)
    assert rates["holm"] <= limit and rates["bh"] <= limit, rates
    assert rates["raw"] > 2 * limit, rates  # ten tests uncorrected: false positives do happen


def test_paired_levels_are_distinct_seeded_and_inside_the_split():
    from proclab.envs import LevelSplit
    from proclab.errors import ProclabError
    from proclab.interpret.interventions.batched_play import paired_levels

    bounded = paired_levels(LevelSplit(1000, 200), 50, 0)
    assert len(set(bounded)) == 50 and all(1000 <= lv < 1200 for lv in bounded)
    assert list(bounded) == list(paired_levels(LevelSplit(1000, 200), 50, 0))
    assert list(bounded) != list(paired_levels(LevelSplit(1000, 200), 50, 1))
    assert sorted(paired_levels(LevelSplit(5, 10), 10, 3)) == list(range(5, 15))
    assert len(set(paired_levels(LevelSplit(0, 0), 30, 0))) == 30
    with pytest.raises(ProclabError, match="which has 200"):
        paired_levels(LevelSplit(1000, 200), 201, 0)
