"""Swaps of two coordinates: the edit against a hand computation, a GRU's swapped play against the same swap
written by hand at its hook point, the sweep's swap variants against a planted agent whose units are swapped
inside its own code, and directions to swap picked from an atlas by measurement."""

import numpy as np
import pytest
import torch

from planted import KEY, UNITS, Corridor, PlantedAgent, recorded_states, unit_basis
from proclab.errors import ProclabError
from proclab.interpret.bases.coordinates import LinearCoordinates
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.bases.units import UnitCoordinates
from proclab.interpret.interventions.arms import Recorded
from proclab.interpret.interventions.batched_play import play
from proclab.interpret.sweep.grid import SweepSettings, sweep
from proclab.interpret.sweep.plan import swap_code
from proclab.interpret.sweep.swaps import parse_swaps, pick_direction, resolve
from proclab.models import AgentConfig, build_agent
from proclab.models.hooks import patch
from proclab.models.interventions import STEP_KEY, edit_coordinates
from proclab.run.runtime import make_runtime
from proclab.stats.corrections import holm
from support import TINY_AGENT, hold_player

D = 16
RT = make_runtime("cpu", "fp32", 1)


@pytest.fixture(scope="module")
def basis():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, D)) @ rng.normal(size=(D, D)) * 0.3
    return Basis.fit(x, BasisConfig(n_ics=4), {"activation": "state_out/core.0.h"})


@pytest.mark.parametrize("system", ["ica", "units"])
def test_swap_exchanges_two_coordinates_and_keeps_everything_else(basis, system):
    coords = UnitCoordinates(basis) if system == "units" else LinearCoordinates(basis, "ica")
    h = torch.from_numpy(np.random.default_rng(2).normal(size=(4, D)))
    first, second = torch.tensor([0, -1, 3, 1]), torch.tensor([2, -1, 1, 1])
    out = edit_coordinates(coords, h, "swap", first, second)
    c, d = coords.encode(h).numpy(), coords.directions()
    for r in range(4):
        if first[r] < 0:
            assert torch.equal(out[r], h[r])
            continue
        i, j = int(first[r]), int(second[r])
        by_hand = h[r].numpy() + (c[r, j] - c[r, i]) * d[i] + (c[r, i] - c[r, j]) * d[j]
        np.testing.assert_allclose(out[r].numpy(), by_hand, rtol=0, atol=1e-12)
        new = coords.encode(out[r : r + 1]).numpy()[0]
        expected = c[r].copy()
        expected[[i, j]] = c[r, [j, i]]
        np.testing.assert_allclose(new, expected, atol=1e-10)


def test_a_gru_swapped_in_the_sweeps_player_is_the_swap_written_at_its_hook(basis):
    torch.manual_seed(0)
    agent = build_agent(AgentConfig(core="gru", rnn_size=D, **TINY_AGENT)).eval()
    coords = LinearCoordinates(basis, "ica")
    g = torch.Generator().manual_seed(1)
    obs = torch.randint(0, 256, (5, 3, 3, 64, 64), generator=g, dtype=torch.uint8)
    pairs = [(0, 2), None, (3, 1)]
    timed, plan = hold_player(agent, coords, "core.0.h", np.zeros((4, 4)), seed=0)
    codes = torch.tensor([-1 if p is None else swap_code(*p, coords.k) for p in pairs])
    timed.interventions = plan(codes, torch.zeros(3))
    state, first = timed.initial_state(3), torch.ones(3, dtype=torch.bool)
    got = []
    with torch.no_grad():
        for t in range(5):
            out, state = timed.step(obs[t], state, first)
            got.append(out.logits)
            first = torch.zeros(3, dtype=torch.bool)
    assert STEP_KEY in state
    proj, dirs = basis.to_coords, basis.directions("ica")
    for r, pair in enumerate(pairs):

        def by_hand(h, pair=pair):  # the state's ICs i and j exchanged, in numpy
            if pair is None:
                return h
            i, j = pair
            c = proj(h.double().numpy(), "ica")
            change = (c[:, j] - c[:, i])[:, None] * dirs[i] + (c[:, i] - c[:, j])[:, None] * dirs[j]
            return h + torch.from_numpy(change).to(h.dtype)

        s, f = agent.initial_state(1), torch.ones(1, dtype=torch.bool)
        with torch.no_grad(), patch(agent, "core.0.hook_h", by_hand):
            for t in range(5):
                ref, s = agent.step(obs[t, r : r + 1], s, f)
                f = torch.zeros(1, dtype=torch.bool)
                torch.testing.assert_close(got[t][r : r + 1], ref.logits, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(state["core.0.h"][r : r + 1], s["core.0.h"], rtol=1e-5, atol=1e-5)


class SwappedPlanted(PlantedAgent):
    """The planted agent with two of its units exchanged inside its own code, after every step's update:
    the definition of a held swap, written without any basis."""

    def __init__(self, pair):
        super().__init__()
        self.perm = list(range(len(UNITS)))
        self.perm[pair[0]], self.perm[pair[1]] = pair[1], pair[0]

    def units(self, obs, prev):
        return super().units(obs, prev)[:, self.perm]


def planted():
    coords = LinearCoordinates(unit_basis(), "ica")
    states = torch.from_numpy(recorded_states()).double()
    return coords, Recorded(coords.encode(states).numpy(), np.zeros(len(UNITS)))


def test_the_sweeps_swaps_are_the_planted_agent_swapped_in_its_own_code():
    """Gate and drive swapped (the agent then moves right only when the drive cue is above one half, not
    0.3): episodes equal the hand-swapped agent's, the change in length is significant; position and
    echo swapped (read by nothing): no change at all; style and drive swapped: every episode as the
    hand-swapped agent's (which idle button, and when, follows the other cue). Adding the swaps leaves every direction's result and
    claim as it was, and the swaps are corrected as one family of their own."""
    coords, rec = planted()
    levels = np.arange(2000, 2040)
    args = SweepSettings(levels=40, rows=96, permutations=999, bootstrap=200, arms="mean,p95")
    plain, _, _ = sweep(PlantedAgent(), coords, KEY, rec, Corridor(96), levels, [1, 3], args, RT)
    pairs = [(0, 1), (2, 4), (3, 1)]
    both, out, variants = sweep(
        PlantedAgent(), coords, KEY, rec, Corridor(96), levels, [1, 3], args, RT, swaps=pairs
    )
    assert both["results"] == plain["results"] and both["claims"] == plain["claims"]
    assert [s["swap"] for s in both["swaps"]] == [[0, 1], [2, 4], [3, 1]] and plain["swaps"] == []
    for k, pair in enumerate(pairs):
        v = variants.held + k
        assert variants.arm[v] == f"swap {pair[0]}:{pair[1]}"
        ref = play(
            *hold_player(SwappedPlanted(pair), coords, KEY),
            Corridor(8),
            levels,
            np.array([-1]),
            np.zeros((1, 40)),
            RT,
        )
        np.testing.assert_array_equal(out.ret[v], ref.ret[0])
        np.testing.assert_array_equal(out.length[v], ref.length[0])
        np.testing.assert_array_equal(out.actions[v], ref.actions[0])
    gate_drive, position_echo, _ = both["swaps"]
    assert gate_drive["length"]["change"] > 0 and gate_drive["length"]["significant"]
    assert position_echo["length"]["change"] == position_echo["tv_distance"]["value"] == 0
    p = [s["length"]["p"] for s in both["swaps"]]
    np.testing.assert_allclose([s["length"]["p_adjusted"] for s in both["swaps"]], holm(p))


def test_swaps_are_parsed_and_named_sides_picked_by_measurement():
    assert parse_swaps("3:7, saw:crate,0:saw") == [(3, 7), ("saw", "crate"), (0, "saw")]
    for bad in ("3", "3:7:1", "a-b:3", "3:-1"):
        with pytest.raises(ProclabError, match="--swaps"):
            parse_swaps(bad)

    def card(m, saw, crate, tracked=(True, True)):
        rows = [("gt saw proximity", saw, tracked[0]), ("gt crate proximity", crate, tracked[1])]
        return {"direction": m, "tracks": [{"quantity": q, "r0": r, "ci0": [r - 0.1, r + 0.1], "tracked": t}
                                           for q, r, t in rows]}  # fmt: skip

    atlas = {
        "basis": "ica",
        "quantities": ["value", "gt saw proximity", "gt crate proximity"],
        "cards": [
            card(0, 0.1, 0.5),
            card(1, -0.6, 0.55),
            card(2, 0.9, 0.2, (False, True)),
            card(3, 0.3, 0.05),
        ],
    }
    # by hand: saw -> the largest tracked |r| is direction 1 (-0.6; direction 2's 0.9 is not tracked);
    # crate -> direction 1 (0.55) is taken, so direction 0 (0.5)
    ids, picks = resolve(parse_swaps("saw:crate,2:3"), 4, lambda: atlas)
    assert ids == [(1, 0), (2, 3)] and [p["direction"] for p in picks] == [1, 0]
    assert picks[0]["r0"] == -0.6 and picks[0]["quantity"] == "gt saw proximity"
    assert pick_direction(atlas, "crate", set())["direction"] == 1
    with pytest.raises(ProclabError, match="no quantity 'gt lava proximity'"):
        resolve([("lava", 1)], 4, lambda: atlas)
    with pytest.raises(ProclabError, match="outside the basis' directions 0-3"):
        resolve([(1, 4)], 4, None)
    with pytest.raises(ProclabError, match="looked up in the folder's atlas"):
        resolve([("saw", 1)], 4, None)
    with pytest.raises(ProclabError, match="with itself"):
        resolve([(2, 2)], 4, None)
