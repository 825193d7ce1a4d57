"""The units coordinate system: a unit's z-score against a loop over units, holds that move exactly one unit
of a played GRU's state, and the folder's recorded distribution of the units."""

import numpy as np
import pytest
import torch

from proclab.interpret.bases.coordinates import variance_explained
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.bases.units import UnitCoordinates
from proclab.interpret.interventions.edit_target import recorded
from proclab.interpret.workspace.folder import Workspace
from proclab.interpret.workspace.systems import open_coordinates, system_file
from proclab.models import AgentConfig, build_agent
from support import TINY_AGENT, held_agent, hold

D = 16


def states(n=300, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D)) @ rng.normal(size=(D, D)) * 0.3 + rng.normal(size=D)
    x[:, 5] = 0.25  # a unit that never varies: its sigma is 1
    return x


@pytest.fixture(scope="module")
def basis():
    return Basis.fit(states(), BasisConfig(n_ics=4), {"activation": "state_out/core.0.h"})


def test_a_units_coordinate_is_its_z_score(basis):
    coords = UnitCoordinates(basis)
    x = states(7, seed=3)
    got = coords.encode(torch.from_numpy(x)).numpy()
    for r in range(len(x)):
        for m in range(D):
            assert got[r, m] == pytest.approx((x[r, m] - basis.mean[m]) / basis.std[m], abs=1e-12)
    assert basis.std[5] == 1.0 and coords.k == coords.dim == D
    back = coords.decode(torch.from_numpy(got)).numpy()
    np.testing.assert_allclose(back, x, atol=1e-12)
    np.testing.assert_allclose(coords.directions(), np.diag(basis.std))
    assert variance_explained(coords, x, basis.mean, basis.std) == pytest.approx(1.0)


def test_hold_moves_exactly_one_unit(basis):
    coords = UnitCoordinates(basis)
    h = torch.from_numpy(states(4, seed=4))
    dims = torch.tensor([3, -1, 0, 15])
    values = torch.tensor([2.0, 9.0, -1.5, 0.5], dtype=torch.float64)
    out = hold(coords, h, dims, values)
    for r in range(4):
        if dims[r] < 0:
            assert torch.equal(out[r], h[r])
            continue
        m = int(dims[r])
        expected = h[r].clone()
        expected[m] = basis.mean[m] + basis.std[m] * float(values[r])  # the unit's own scale, by hand
        torch.testing.assert_close(out[r], expected, rtol=0, atol=1e-12)
        others = [u for u in range(D) if u != m]
        assert torch.equal(out[r, others], h[r, others])


def test_a_gru_held_on_a_unit_carries_that_unit_at_its_value(basis):
    torch.manual_seed(0)
    agent = build_agent(AgentConfig(core="gru", rnn_size=D, **TINY_AGENT)).eval()
    coords = UnitCoordinates(basis)
    g = torch.Generator().manual_seed(0)
    obs = torch.randint(0, 256, (5, 3, 3, 64, 64), generator=g, dtype=torch.uint8)
    firsts = torch.zeros(5, 3, dtype=torch.bool)
    firsts[0] = True
    held = held_agent(agent, coords, "core.0.h", torch.tensor([7, -1, 2]), torch.tensor([1.5, 0.0, -2.0]))
    with torch.no_grad():
        _, state = held.unroll(obs, agent.initial_state(3), firsts)
        _, plain = agent.unroll(obs, agent.initial_state(3), firsts)
    h = state["core.0.h"].reshape(3, -1).double()
    assert float(h[0, 7]) == pytest.approx(basis.mean[7] + 1.5 * basis.std[7], abs=1e-5)
    assert float(h[2, 2]) == pytest.approx(basis.mean[2] - 2.0 * basis.std[2], abs=1e-5)
    assert torch.equal(state["core.0.h"][1], plain["core.0.h"][1])  # the unheld row plays the plain agent


def test_the_folder_opens_units_on_its_basis_and_records_their_distribution(basis, tmp_path):
    ws = Workspace.open(tmp_path / "A")
    ws.require_inputs(activation="state_out/core.0.h")
    basis.save(ws.basis_path)
    x = states()
    (tmp_path / "A" / "hidden").mkdir()
    np.savez(tmp_path / "A" / "hidden" / "hidden.npz", ics=basis.to_ics(x), pcs=basis.to_pcs(x))
    ws.record_command("hidden", {}, [], 0.0)
    coords = open_coordinates(ws, "units")
    assert isinstance(coords, UnitCoordinates) and system_file(ws, "units") == ws.basis_path
    torch.manual_seed(0)
    agent = build_agent(AgentConfig(core="gru", rnn_size=D, **TINY_AGENT))
    rec = recorded(ws, coords, agent, "core.0.h")
    np.testing.assert_allclose(rec.values, (x - basis.mean) / basis.std, atol=1e-9)
    np.testing.assert_allclose(rec.start, -basis.mean / basis.std, atol=1e-12)  # the all-zero start state
