"""One agent protocol: a trained agent, an edited one and a scripted policy answer the same calls; hook
functions as TransformerLens takes them; caches that keep gradients; edits that round-trip through JSON."""

import json
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from proclab.errors import ProclabError
from proclab.interpret.bases.coordinates import LinearCoordinates
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.models import build_agent
from proclab.models.edited import AgentLike, Intervened, env_config_of, hook_shapes, module_of, run_with_hooks
from proclab.models.interventions import (
    Channels,
    Coordinates,
    Direction,
    Intervention,
    Mask,
    Sites,
    Units,
)
from proclab.models.scripted import ScriptedAgent
from support import TINY_GRU

T, B = 4, 3
CONV, FC, STATE = "torso.block1.hook_out", "torso.hook_fc", "core.0.hook_h"


@pytest.fixture(scope="module")
def agent():
    torch.manual_seed(0)
    return build_agent(TINY_GRU).eval()


@pytest.fixture(scope="module")
def obs():
    return torch.randint(
        0, 256, (T, B, 3, 64, 64), dtype=torch.uint8, generator=torch.Generator().manual_seed(2)
    )


def test_three_kinds_of_agent_answer_as_one(agent, obs):
    edited = Intervened(agent, [Intervention(FC, "units 1", "set", 0.0)])
    scripted = ScriptedAgent(3)
    for a in (agent, edited, scripted):
        assert isinstance(a, AgentLike) and isinstance(a, nn.Module)
        out, _state, cache = a.run_with_cache(obs, names="heads.*")
        assert out.logits.shape == (T, B, 15) and list(cache) == ["heads.hook_logits", "heads.hook_value"]
        torch.testing.assert_close(cache["heads.hook_logits"], out.logits)
    # the edited agent's modules are the agent's own: the same hook names, weights, state dict and shapes
    assert edited.hook_names() == agent.hook_names() and edited.hook_shapes() == agent.hook_shapes()
    assert edited.state_dict().keys() == agent.state_dict().keys()
    assert all(p is q for p, q in zip(edited.parameters(), agent.parameters(), strict=True))
    assert edited.config is agent.config and edited.state_shapes() == agent.state_shapes()
    assert not hasattr(edited, "no_such_attribute")  # nothing is delegated by __getattr__
    assert scripted.run_with_cache(obs)[0].logits.argmax(-1).eq(3).all()


def test_a_hook_function_replaces_or_reads_an_activation(agent, obs):
    seen = []
    with torch.no_grad():
        plain = agent.run_with_cache(obs, names=[FC, STATE])[2]
    unit = int(plain[FC].abs().mean((0, 1)).argmax())  # a unit the frames drive (a random net has dead ones)

    def read(act, hook):
        seen.append((hook.name, tuple(act.shape)))  # returns None: the activation is kept

    def zero_unit(act, hook):
        act = act.clone()
        act[..., unit] = 0
        return act

    with torch.no_grad():
        _, _, cache = agent.run_with_hooks(obs, fwd_hooks=[(FC, zero_unit), ("core.*.hook_h", read)],
                                           names=[FC, STATE])  # fmt: skip
        declared = agent.run_with_hooks(obs, interventions=[Intervention(FC, f"units {unit}", "set", 0.0)],
                                        names=[FC, STATE])[2]  # fmt: skip
    assert seen == [(STATE, (B, 16))] * T  # a per-step hook point fires once per step with (B, ...)
    expected = plain[FC].clone()
    expected[..., unit] = 0
    torch.testing.assert_close(cache[FC], expected)
    torch.testing.assert_close(cache[STATE], declared[STATE])  # the function and the declared edit agree
    assert not torch.equal(cache[STATE], plain[STATE])
    assert not agent.torso.hook_fc._forward_hooks  # removed after the call
    with pytest.raises(ProclabError, match=r"a hook function returned \(2,\)"):
        run_with_hooks(agent, obs, fwd_hooks=[(FC, lambda act, hook: torch.zeros(2))])
    assert not agent.torso.hook_fc._forward_hooks  # also when it raised


def test_a_cache_can_keep_its_gradients(agent, obs):
    frames = (obs.float() / 255).requires_grad_(True)
    out, _, cache = agent.run_with_cache(frames, names=[CONV, STATE], grad=True)
    assert cache[CONV].requires_grad
    grads = cache.gradients(out.value.sum())
    assert grads[CONV].shape == cache[CONV].shape and grads[STATE].shape == cache[STATE].shape
    # by hand: step t's state alone replaced by a leaf of the same value (the later steps computed from it),
    # the gradient of the same output with respect to that leaf: every path from it, through later steps too
    for t in range(T):
        leaf = cache[STATE][t].detach().requires_grad_(True)
        calls = iter(range(T))

        def at_t(act, hook, leaf=leaf, t=t, calls=calls):
            return leaf if next(calls) == t else None

        value = agent.run_with_hooks(frames.detach(), fwd_hooks=[(STATE, at_t)])[0].value
        (by_hand,) = torch.autograd.grad(value.sum(), leaf)
        torch.testing.assert_close(grads[STATE][t], by_hand)
    assert grads[STATE][-1].abs().sum() > 0 and grads[CONV].abs().sum() > 0
    with pytest.raises(ProclabError, match="grad=True"):
        agent.run_with_cache(frames.detach(), names=[CONV])[2].gradients(out.value.sum())


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, tuple | list):
        return (
            type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    return a == b


def test_interventions_round_trip_through_json_losslessly():
    g = torch.Generator().manual_seed(3)
    basis = Basis.fit(torch.randn(200, 16, generator=g).double().numpy(), BasisConfig(n_ics=4, seed=0), {})
    ica = LinearCoordinates(basis, "ica")
    edits = [
        Intervention(CONV, Channels((1, 5)), "set", 1.7, rows=[0, 2]),
        Intervention(CONV, Sites(((1, 2, 3),)), "add", torch.randn(3, 8, 16, 16, generator=g), per_row=True),
        Intervention(FC, Units((3,)), "scale", torch.tensor(0.25, dtype=torch.float64), steps=(2, None)),
        Intervention(FC, "all", "resample", source=torch.randn(50, 32, generator=g)),
        Intervention(
            FC, Mask(torch.rand(32, generator=g) > 0.5), "patch", source=torch.randn(6, 32, generator=g)
        ),
        Intervention(
            STATE, Direction(torch.randn(16, generator=g)), "add", 2.0, steps=(0, torch.tensor([3, -1, 5]))
        ),
        Intervention(
            STATE,
            Coordinates(ica, torch.tensor([0, -1, 2]), torch.tensor([1, 2, 3])),
            "swap",
            per_row=True,
            rows=torch.tensor([True, False, True]),
        ),
        Intervention(STATE, Coordinates(ica, 1), "set", 0.5, of="increment"),
    ]
    for iv in edits:
        back = Intervention.from_dict(json.loads(json.dumps(iv.to_dict())), systems={"ica": ica})
        for field in ("hook", "kind", "value", "source", "per_row", "rows", "steps", "of"):
            assert _equal(getattr(back, field), getattr(iv, field)), (iv.describe(), field)
        sel, got = iv.select, back.select
        assert type(got) is type(sel)
        for field in ("channels", "sites", "units", "vector", "mask_", "index", "other"):
            if hasattr(sel, field):
                assert _equal(getattr(got, field), getattr(sel, field)), (iv.describe(), field)
        if isinstance(sel, Coordinates):
            assert got.system is ica
        assert back.describe() == iv.describe()
    with pytest.raises(ProclabError, match="pass systems="):
        Intervention.from_dict(edits[-1].to_dict())


def test_what_an_agent_does_not_say_is_refused_in_one_line(agent):
    """An agent built in memory or scripted names no game (steering and sweeps need one), and whatever is not a
    torch module cannot be hooked: one line each, not an error from deep inside."""
    for a in (agent, ScriptedAgent(3)):
        with pytest.raises(ProclabError, match="which game it plays"):
            env_config_of(a)
    assert module_of(agent) is agent
    with pytest.raises(ProclabError, match="an agent is a torch module"):
        hook_shapes(SimpleNamespace())
