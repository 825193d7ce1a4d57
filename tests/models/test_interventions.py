"""Interventions as data and the one wrapper that applies them, against edits written out by hand."""

import pytest
import torch

from proclab.errors import ProclabError
from proclab.models import build_agent
from proclab.models.edited import Intervened
from proclab.models.interventions import (
    STEP_KEY,
    Channels,
    Coordinates,
    Direction,
    Intervention,
    Mask,
    Sites,
    Units,
    parse_intervention,
    parse_selection,
)
from support import TINY_GRU

T, B = 5, 4
CONV = "torso.block1.hook_out"  # (8, 16, 16) in the tiny agent
FC = "torso.hook_fc"  # (32,)
STATE = "core.0.hook_h"  # (16,), once per step


@pytest.fixture(scope="module")
def agent():
    torch.manual_seed(0)
    return build_agent(TINY_GRU).eval()


@pytest.fixture(scope="module")
def episode():
    g = torch.Generator().manual_seed(1)
    obs = torch.randint(0, 256, (T, B, 3, 64, 64), dtype=torch.uint8, generator=g)
    firsts = torch.zeros(T, B, dtype=torch.bool)
    firsts[0] = True
    firsts[3, 1] = True  # row 1 starts a new episode at step 3
    return obs, firsts


def plain(agent, episode, names):
    obs, firsts = episode
    with torch.no_grad():
        return agent.run_with_cache(obs, agent.initial_state(B), names, firsts)[2]


def edited(agent, episode, interventions, names):
    obs, firsts = episode
    wrapped = Intervened(agent, interventions)
    with torch.no_grad():
        return wrapped.run_with_cache(obs, wrapped.initial_state(B), names, firsts)


def test_the_cache_is_time_major_for_every_layout(agent, episode):
    cache = plain(agent, episode, None)
    shapes = agent.hook_shapes()
    assert list(cache) == list(shapes) == agent.hook_names()
    for name, x in cache.items():
        assert tuple(x.shape) == (T, B, *shapes[name]), name


def test_stepping_and_unrolling_cache_the_same(agent, episode):
    obs, firsts = episode
    whole = plain(agent, episode, ["torso.*", STATE, "heads.*"])
    state = agent.initial_state(B)
    parts = []
    with torch.no_grad():
        for t in range(T):
            _, state, cache = agent.run_with_cache(obs[t], state, ["torso.*", STATE, "heads.*"], firsts[t])
            parts.append(cache)
    for name in whole:
        torch.testing.assert_close(torch.cat([c[name] for c in parts]), whole[name], rtol=1e-5, atol=1e-5)


def test_patterns_pick_hook_names(agent, episode):
    cache = plain(agent, episode, ["torso.block1.res*.hook_out", STATE])
    assert list(cache) == ["torso.block1.res0.hook_out", "torso.block1.res1.hook_out", STATE]
    with pytest.raises(ProclabError, match=r"no\.such"):
        plain(agent, episode, ["no.such.*"])


@pytest.mark.parametrize(
    ("select", "by_hand"),
    [
        ("channels 2,5", lambda x, v: x.index_fill(2, torch.tensor([2, 5]), v)),
        (Sites(((3, 4, 5), (0, 0, 15))), None),
        ("all", lambda x, v: torch.full_like(x, v)),
    ],
)
def test_set_writes_exactly_the_selected_elements(agent, episode, select, by_hand):
    before = plain(agent, episode, [CONV])[CONV]
    _, _, cache = edited(agent, episode, [Intervention(CONV, select, "set", 1.75)], [CONV])
    if by_hand is None:  # sites, one element at a time
        expected = before.clone()
        for c, y, x in select.sites:
            expected[:, :, c, y, x] = 1.75
    else:
        expected = by_hand(before, 1.75)
    torch.testing.assert_close(cache[CONV], expected)


def test_add_and_scale_of_units_and_a_full_shape_vector(agent, episode):
    before = plain(agent, episode, [CONV])
    vector = torch.randn(8, 16, 16, generator=torch.Generator().manual_seed(3))
    add = Intervention(CONV, "all", "add", vector)
    _, _, upstream = edited(agent, episode, [add], [FC])  # the fc layer reads the edited map
    _, _, cache = edited(agent, episode, [Intervention(FC, Units((1, 7)), "scale", -2.0), add], [FC, CONV])
    expected_fc = upstream[FC].clone()
    expected_fc[..., [1, 7]] *= -2.0
    torch.testing.assert_close(cache[FC], expected_fc)
    torch.testing.assert_close(cache[CONV], before[CONV] + vector)


def test_direction_edits_change_only_the_component_along_it(agent, episode):
    d = torch.randn(8, generator=torch.Generator().manual_seed(4))
    before = plain(agent, episode, [CONV])[CONV]
    _, _, cache = edited(agent, episode, [Intervention(CONV, Direction(d), "set", 0.5)], [CONV])
    unit = (d / d.norm()).view(1, 1, 8, 1, 1)
    comp_after = (cache[CONV] * unit).sum(2)
    torch.testing.assert_close(comp_after, torch.full_like(comp_after, 0.5), rtol=1e-5, atol=1e-5)
    residual = lambda x: x - (x * unit).sum(2, keepdim=True) * unit  # noqa: E731
    torch.testing.assert_close(residual(cache[CONV]), residual(before), rtol=1e-5, atol=1e-5)
    _, _, added = edited(agent, episode, [Intervention(CONV, Direction(d), "add", 3.0)], [CONV])
    torch.testing.assert_close(added[CONV], before + 3.0 * d.view(1, 1, 8, 1, 1))


def test_per_row_values_rows_and_steps(agent, episode):
    before = plain(agent, episode, [FC])[FC]
    values = torch.tensor([1.0, 2.0, 3.0, 4.0])
    ivs = [Intervention(FC, Units((0,)), "set", values, per_row=True, rows=[0, 2], steps=(1, 3))]
    _, _, cache = edited(agent, episode, ivs, [FC])
    expected = before.clone()
    for t in range(T):
        for b in (0, 2):  # rows 0 and 2 never restart: their episode step is t
            if 1 <= t < 3:
                expected[t, b, 0] = values[b]
    torch.testing.assert_close(cache[FC], expected)


def test_steps_restart_with_each_episode(agent, episode):
    before = plain(agent, episode, [FC])[FC]
    _, state, cache = edited(agent, episode, [Intervention(FC, Units((3,)), "set", 9.0, steps=(0, 1))], [FC])
    expected = before.clone()
    expected[0, :, 3] = 9.0
    expected[3, 1, 3] = 9.0  # row 1's second episode starts at step 3
    torch.testing.assert_close(cache[FC], expected)
    assert state[STEP_KEY].tolist() == [5, 2, 5, 5]


def test_patch_writes_each_rows_source(agent, episode):
    donor = torch.randn(B, 32, generator=torch.Generator().manual_seed(5))
    _, _, cache = edited(agent, episode, [Intervention(FC, "all", "patch", source=donor)], [FC])
    torch.testing.assert_close(cache[FC], donor.expand(T, B, 32))


def test_resample_draws_rows_of_the_pool(agent, episode):
    pool = torch.arange(3 * 32, dtype=torch.float32).view(3, 32)
    _, _, cache = edited(agent, episode, [Intervention(FC, "all", "resample", source=pool)], [FC])
    rows = cache[FC].reshape(-1, 32)
    assert all(any(torch.equal(r, p) for p in pool) for r in rows)
    assert len({int(r[0]) for r in rows}) > 1  # drawn per row, not once


def test_per_row_masks(agent, episode):
    before = plain(agent, episode, [CONV])[CONV]
    mask = torch.zeros(B, 8, 16, 16, dtype=torch.bool)
    mask[1, 2, 3, 4] = True
    mask[3, 0, 0, 0] = True
    _, _, cache = edited(agent, episode, [Intervention(CONV, Mask(mask), "set", -1.0, per_row=True)], [CONV])
    expected = before.clone()
    expected[:, 1, 2, 3, 4] = -1.0
    expected[:, 3, 0, 0, 0] = -1.0
    torch.testing.assert_close(cache[CONV], expected)


class Rotation:
    """A linear coordinate system by hand: ``c = (h - origin) @ P``, written back through ``D = P^-1``."""

    def __init__(self, dim: int, k: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=g, dtype=torch.float64))
        self.P, self.D = q[:, :k].float(), q[:, :k].T.float()
        self.origin = torch.randn(dim, generator=g)
        self.k, self.dim, self.label = k, dim, "IC"

    def encode(self, h):
        return (h - self.origin) @ self.P

    def write(self, h, c, c_new):
        return h + (c_new - c) @ self.D

    def encode_change(self, delta):
        return delta @ self.P

    def decode_change(self, c):
        return c @ self.D


def test_coordinate_hold_swap_and_move_against_loops(agent, episode):
    system = Rotation(16, 6, seed=6)
    before = plain(agent, episode, [STATE])[STATE]
    index = torch.tensor([0, -1, 2, 5])
    other = torch.tensor([1, -1, 4, 0])
    cases = {
        "set": Intervention(
            STATE, Coordinates(system, index), "set", torch.tensor([0.5, 0, 1.5, -2.0]), per_row=True
        ),
        "swap": Intervention(STATE, Coordinates(system, index, other), "swap", per_row=True),
        "move": Intervention(STATE, Coordinates(system, index, other), "move", per_row=True),
    }
    for kind, iv in cases.items():
        _, _, cache = edited(agent, episode, [iv], [STATE])
        # the first step's edit by hand (later steps start from the edited state, so only step 0 is free of it)
        h = before[0]
        for b in range(B):
            got = cache[STATE][0, b]
            if index[b] < 0:
                torch.testing.assert_close(got, h[b])
                continue
            c = system.encode(h[b : b + 1])[0]
            c_new = c.clone()
            i, j = int(index[b]), int(other[b])
            if kind == "set":
                c_new[i] = iv.value[b]
            elif kind == "swap":
                c_new[i], c_new[j] = c[j], c[i]
            else:
                c_new[i] = 0
                c_new[j] = c_new[j] + c[i]
            torch.testing.assert_close(
                got, system.write(h[b : b + 1], c[None], c_new[None])[0], rtol=1e-5, atol=1e-5
            )
            c_got = system.encode(got[None])[0]
            untouched = [m for m in range(system.k) if m not in (i, j)]
            torch.testing.assert_close(c_got[untouched], c[untouched], rtol=1e-4, atol=1e-5)


def test_an_increment_edit_equals_the_step_by_step_definition(agent, episode):
    """``c' = c`` with coordinate 2 zeroed, ``c`` the coordinates of ``h_t - h'_{t-1}`` (0 after a reset):
    played step by step by hand with patched states, against the wrapper's unroll."""
    obs, firsts = episode
    system = Rotation(16, 6, seed=7)
    iv = Intervention(STATE, Coordinates(system, 2), "set", 0.0, of="increment")
    _, _, cache = edited(agent, episode, [iv], [STATE])
    state, prev = agent.initial_state(B), torch.zeros(B, 16)
    with torch.no_grad():
        for t in range(T):
            prev = prev * (~firsts[t]).float()[:, None]
            _, _, plain_cache = agent.run_with_cache(obs[t], state, [STATE], firsts[t])
            h = plain_cache[STATE][0]
            c = system.encode_change(h - prev)
            c_new = c.clone()
            c_new[:, 2] = 0
            h_edit = h + system.decode_change(c_new - c)
            torch.testing.assert_close(cache[STATE][t], h_edit, rtol=1e-5, atol=1e-5)
            state, prev = {"core.0.h": h_edit}, h_edit


def test_stepping_an_intervened_agent_equals_its_unroll(agent, episode):
    obs, firsts = episode
    system = Rotation(16, 6, seed=8)
    ivs = [
        Intervention(STATE, Coordinates(system, 1, 3), "move", of="increment"),
        Intervention(CONV, "channels 1", "scale", 0.0, steps=(2, None)),
    ]
    wrapped = Intervened(agent, ivs)
    with torch.no_grad():
        whole, end = wrapped.unroll(obs, wrapped.initial_state(B), firsts)
        state, logits = wrapped.initial_state(B), []
        for t in range(T):
            out, state = wrapped.step(obs[t], state, firsts[t])
            logits.append(out.logits)
    torch.testing.assert_close(torch.stack(logits), whole.logits, rtol=1e-5, atol=1e-5)
    assert torch.equal(state[STEP_KEY], end[STEP_KEY])


def test_captures_see_the_edited_value_and_no_edit_is_the_plain_agent(agent, episode):
    obs, firsts = episode
    with torch.no_grad():
        base, _ = agent.unroll(obs, agent.initial_state(B), firsts)
        same, _ = Intervened(agent, []).unroll(obs, agent.initial_state(B), firsts)
    assert torch.equal(base.logits, same.logits)
    _, _, cache = edited(agent, episode, [Intervention(FC, "all", "set", 0.0)], [FC, "hook_features"])
    assert not cache[FC].any() and not cache["hook_features"].any()


def test_text_and_bad_input_give_one_line(agent):
    assert parse_selection("channels 10, 27") == Channels((10, 27))
    assert parse_selection("site 7@4,5") == Sites(((7, 4, 5),))
    iv = parse_intervention(CONV, "channel 7 set 0")
    assert iv.describe() == f"{CONV} channel 7 set 0"
    assert iv.to_dict()["select"] == {"type": "channels", "channels": [7]}
    for text in ("channel x set 0", "channel 7 fly 2", "channel 7 set", "all mean 3"):
        with pytest.raises(ProclabError):
            parse_intervention(CONV, text)
    with pytest.raises(ProclabError, match="hook point"):
        Intervened(agent, [Intervention("no.such.hook", "all", "set", 0.0)])
    with pytest.raises(ProclabError, match="outside"):
        edited(
            agent,
            (torch.zeros(1, 1, 3, 64, 64, dtype=torch.uint8), torch.ones(1, 1, dtype=torch.bool)),
            [Intervention(CONV, "channel 99", "set", 0.0)],
            [],
        )
    with pytest.raises(ProclabError, match="source"):
        Intervention(CONV, "all", "mean")
    with pytest.raises(ProclabError, match="coordinates"):
        Intervention(CONV, "all", "swap")


def test_a_cache_answers_membership_and_refuses_unknown_names(agent, episode):
    cache = plain(agent, episode, [FC])
    assert FC in cache and "core.0.hook_h" not in cache
    with pytest.raises(ProclabError, match="cached hook point"):
        cache["core.0.hook_h"]
