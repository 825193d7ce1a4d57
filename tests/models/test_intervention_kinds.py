"""Interventions at hook points: each kind against a slow element-by-element reference; identity edits are
bit-exact; a patch with a donor's activation gives the donor's outputs."""

import numpy as np
import pytest
import torch

from proclab.errors import ProclabError
from proclab.models import AgentConfig, build_agent
from proclab.models.edited import Intervened, hook_shapes
from proclab.models.interventions import Channels, Direction, Intervention, Sites, Units, parse_intervention
from support import TINY_AGENT

CONV = "torso.block1.hook_out"


@pytest.fixture(scope="module")
def agents():
    torch.manual_seed(0)
    return {
        "gru": build_agent(AgentConfig(core="gru", rnn_size=16, **TINY_AGENT)).eval(),
        "none": build_agent(AgentConfig(core="none", **TINY_AGENT)).eval(),
    }


def frames(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, 64, 64), generator=g, dtype=torch.uint8)


def selected(edit: Intervention, idx: tuple[int, ...]) -> bool:
    sel = edit.select
    if isinstance(sel, Channels):
        return idx[0] in sel.channels
    if isinstance(sel, Sites):
        return idx in sel.sites
    if isinstance(sel, Units):
        return idx[0] in sel.units
    return True


def reference(edit: Intervention, act: np.ndarray, picks: np.ndarray | None = None) -> np.ndarray:
    """Element by element, rows ``(N, ...)`` of a conv map or flat activation."""
    out = act.copy()
    src = None if edit.source is None else edit.source.numpy()
    for r in range(len(act)):
        if edit.kind == "resample":
            row_src = src.reshape(-1, *act.shape[1:])[picks[r]]
        elif src is not None:
            row_src = src if src.shape == act.shape[1:] else src.reshape(act.shape)[r]
        if isinstance(edit.select, Direction):
            d = edit.select.vector.numpy().astype(np.float64)
            u = d / np.sqrt((d**2).sum())
            for pos in np.ndindex(*act.shape[2:]):
                v = act[(r, slice(None), *pos)].astype(np.float64)
                c = (v * u).sum()
                if edit.kind == "add":
                    new = v + edit.value * d
                else:
                    target = {
                        "set": edit.value,
                        "scale": c * edit.value,
                    }.get(edit.kind)
                    if target is None:
                        target = (row_src[(slice(None), *pos)] * u).sum()
                    new = v + (target - c) * u
                out[(r, slice(None), *pos)] = new
            continue
        for idx in np.ndindex(*act.shape[1:]):
            if not selected(edit, idx):
                continue
            a = act[(r, *idx)]
            if edit.kind == "set":
                out[(r, *idx)] = edit.value
            elif edit.kind == "add":
                out[(r, *idx)] = a + edit.value
            elif edit.kind == "scale":
                out[(r, *idx)] = a * edit.value
            else:
                out[(r, *idx)] = row_src[idx]
    return out


CASES = [
    dict(select="channel 3", kind="set", value=2.5),
    dict(select="site 5@2,7", kind="add", value=-1.0),
    dict(select="all", kind="scale", value=0.5),
    dict(select="channel 1", kind="mean"),
    dict(select="channel 2", kind="resample"),
    dict(select="site 0@1,1", kind="patch"),
    dict(select="direction", kind="add", value=2.0),
    dict(select="direction", kind="set", value=0.3),
    dict(select="direction", kind="scale", value=-1.0),
    dict(select="direction", kind="mean"),
    dict(select="direction", kind="patch"),
]


def hooked(agent, hook: str, obs: torch.Tensor, edits=(), seed: int = 0) -> torch.Tensor:
    """The activation at ``hook`` (after the edits) on one fresh step on ``obs``: ``(B, *sample)``."""
    with torch.no_grad():
        return Intervened(agent, edits, seed=seed).run_with_cache(obs, None, [hook])[2][hook][0]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['select']}-{c['kind']}")
def test_conv_edits_match_reference(agents, case):
    agent = agents["gru"]
    shape = hook_shapes(agent)[CONV]
    assert shape == (8, 16, 16)
    obs = frames(4, 1)
    act = hooked(agent, CONV, obs)
    g = torch.Generator().manual_seed(5)
    source = {
        "mean": torch.rand(shape, generator=g),
        "resample": torch.rand((7, *shape), generator=g),
        "patch": torch.rand((4, *shape), generator=g),
    }.get(case["kind"])
    if case["select"] == "direction":
        case = case | {"select": Direction(torch.randn(8, generator=g))}
    edit = Intervention(CONV, source=source, **case)
    picks = torch.randint(0, 7, (4,), generator=torch.Generator().manual_seed(3)).numpy()
    got = hooked(agent, CONV, obs, [edit], seed=3).numpy()
    want = reference(edit, act.numpy(), picks)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert not np.array_equal(got, act.numpy())


@pytest.mark.parametrize("kind", ["set", "mean"])
def test_flat_units_match_reference(agents, kind):
    agent = agents["none"]
    hook = "torso.hook_fc"
    assert hook_shapes(agent)[hook] == (32,)
    obs = frames(5, 6)
    act = hooked(agent, hook, obs)
    source = torch.rand(32) if kind == "mean" else None
    edit = Intervention(hook, "units 1,30", kind, 4.0, source=source)
    got = hooked(agent, hook, obs, [edit]).numpy()
    np.testing.assert_allclose(got, reference(edit, act.numpy()), rtol=1e-6)


def play(agent, obs, steps: int = 3):
    """A few steps on the same frames through the carried state (the recurrent state is edited too)."""
    state = agent.initial_state(len(obs))
    outs = []
    for t in range(steps):
        out, state = agent.step(obs, state, torch.full((len(obs),), t == 0))
        outs.append(out.logits)
    return torch.stack(outs), state


@pytest.mark.parametrize("core", ["gru", "none"])
def test_identity_edits_are_bit_exact(agents, core):
    agent = agents[core]
    obs = frames(3, 2)
    hooks = [CONV, "torso.hook_fc"] + (["core.0.hook_h"] if core == "gru" else [])
    identities = []
    for hook in hooks:
        identities += [Intervention(hook, "all", "scale", 1.0), Intervention(hook, "all", "add", 0.0)]
    identities.append(Intervention(CONV, Direction(torch.eye(8)[2]), "scale", 1.0))
    with torch.no_grad():
        plain, plain_state = play(agent, obs)
        edited, edited_state = play(Intervened(agent, identities), obs)
    assert torch.equal(plain, edited)
    for k in plain_state:
        assert torch.equal(plain_state[k], edited_state[k])


@pytest.mark.parametrize("hook", [CONV, "torso.hook_relu", "torso.hook_fc"])
def test_patch_gives_the_donors_outputs(agents, hook):
    agent = agents["none"]
    obs, donor = frames(3, 3), frames(3, 4)
    source = hooked(agent, hook, donor)  # the donor's activation, row for row
    patched = Intervened(agent, [Intervention(hook, "all", "patch", source=source)])
    first = torch.ones(3, dtype=torch.bool)
    with torch.no_grad():
        want, _ = agent.step(donor, {}, first)
        got, _ = patched.step(obs, {}, first)
        plain, _ = agent.step(obs, {}, first)
    assert torch.equal(got.logits, want.logits)
    assert not torch.equal(plain.logits, want.logits)


def test_edit_reaches_the_heads(agents):
    """Setting the whole fc layer makes every frame's logits the same."""
    agent = agents["none"]
    edited = Intervened(agent, [Intervention("torso.hook_fc", "all", "set", 0.7)])
    with torch.no_grad():
        out, _ = edited.step(frames(2, 5), {}, torch.ones(2, dtype=torch.bool))
    assert torch.allclose(out.logits[0], out.logits[1])


def test_parse_and_errors(agents):
    e = parse_intervention(CONV, "site 7@4,5 add -3")
    assert (e.select, e.kind, e.value) == (Sites(((7, 4, 5),)), "add", -3.0)
    assert parse_intervention("torso.hook_fc", "units 1,2 scale 2").select == Units((1, 2))
    with pytest.raises(ProclabError, match="selection"):
        parse_intervention(CONV, "channel seven set 0")
    with pytest.raises(ProclabError, match="take a VALUE"):
        parse_intervention(CONV, "channel 7 set")
    with pytest.raises(ProclabError, match="needs the activation"):
        parse_intervention(CONV, "channel 7 mean")
    with pytest.raises(ProclabError, match="hook point"):
        Intervened(agents["none"], [Intervention("torso.nope")])
    with pytest.raises(ProclabError, match="channel 9 is outside"):
        Intervened(agents["none"], [Intervention(CONV, "channel 9")])


@pytest.mark.parametrize("kind", ["set", "add", "scale"])
def test_per_row_values_along_a_direction_are_each_rows_own(agents, kind):
    """Row r of a per-row edit along a direction is the edit with row r's value alone, for every kind."""
    agent = agents["gru"]
    obs = frames(3, 7)
    direction = Direction(torch.randn(8, generator=torch.Generator().manual_seed(8)))
    values = torch.tensor([0.5, -1.0, 2.0])
    got = hooked(agent, CONV, obs, [Intervention(CONV, direction, kind, values, per_row=True)])
    for r, value in enumerate(values.tolist()):
        want = hooked(agent, CONV, obs[r : r + 1], [Intervention(CONV, direction, kind, value)])
        torch.testing.assert_close(got[r : r + 1], want)
