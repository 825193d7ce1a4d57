"""Activation sources: recorded states (layers and their tensors) and hook replay reproducing the store."""

import numpy as np
import pytest

from proclab.errors import ProclabError
from proclab.interpret.bases.activations import (
    canonical_source,
    default_source,
    read_activation,
    state_sources,
)
from proclab.store import EpisodeStore


def test_state_tensors_are_separable(lstm_store):
    store = EpisodeStore(lstm_store)
    sources = state_sources(store)
    assert {"state_out/core.0.h", "state_out/core.0.c", "state_in/core.0.h", "state_out/core.0"} <= set(
        sources
    )
    assert default_source(store) == "state_out/core.0.h"
    assert canonical_source(store, "core.0.c") == "state_out/core.0.c"
    layer = read_activation(store, "state_in/core.0", [1, 0])
    h, c = (
        read_activation(store, "state_in/core.0.h", [1, 0]),
        read_activation(store, "state_in/core.0.c", [1, 0]),
    )
    np.testing.assert_array_equal(np.concatenate([h.x, c.x], axis=1), layer.x)
    assert h.x.dtype == np.float32 and h.x.shape[1] == 16
    ep1 = store.episode(1)
    n1 = ep1.length
    assert (
        (h.episode[:n1] == 1).all() and (h.step[:n1] == np.arange(n1)).all() and (h.episode[n1:] == 0).all()
    )
    np.testing.assert_array_equal(layer.x[:n1], ep1["state_in/core.0"])


@pytest.mark.parametrize("fixture", ["gru_store", "lstm_store"])
def test_replaying_a_state_hook_reproduces_the_stored_states(fixture, request):
    """hook:core.0.hook_h replayed on the stored frames equals the recorded state_out to 1e-5 (fp32)."""
    store = EpisodeStore(request.getfixturevalue(fixture))
    episodes = [2, 0, 1]
    stored = read_activation(store, "core.0.h", episodes)
    replayed = read_activation(store, "hook:core.0.hook_h", episodes)
    assert replayed.x.shape == stored.x.shape
    np.testing.assert_allclose(replayed.x, stored.x, atol=1e-5, rtol=0)
    np.testing.assert_array_equal(replayed.episode, stored.episode)
    np.testing.assert_array_equal(replayed.step, stored.step)


def test_replaying_the_heads_reproduces_the_stored_logits_of_a_feed_forward_agent(ff_store):
    store = EpisodeStore(ff_store)
    logits = read_activation(store, "hook:heads.hook_logits")
    np.testing.assert_allclose(logits.x, store.read_steps("logits_clean"), atol=1e-5, rtol=0)
    fc = read_activation(store, "hook:torso.hook_fc", [0])
    assert fc.x.shape == (store.episodes["length"][0], 32)


def test_bad_sources_are_one_line_errors(gru_store, ff_store, lstm_store):
    store = EpisodeStore(gru_store)
    with pytest.raises(ProclabError, match=r"unknown state 'core.0.c'.*Valid: .*state_out/core.0.h"):
        read_activation(store, "core.0.c")
    with pytest.raises(ProclabError, match=r"unknown hook point 'torso.nope'.*torso.hook_fc"):
        read_activation(store, "hook:torso.nope", [0])
    with pytest.raises(ProclabError, match=r"holds no agent state.*--hook"):
        default_source(EpisodeStore(ff_store))
    with pytest.raises(ProclabError, match="holds no agent state"):
        read_activation(EpisodeStore(ff_store), "core.0.h")
    lstm_ckpt = EpisodeStore(lstm_store).recordings()
    other = next(iter(lstm_ckpt.values()))["recording"]["checkpoint"]
    with pytest.raises(ProclabError, match="agent states of layout"):
        read_activation(store, "hook:torso.hook_fc", [0], checkpoint=other)
