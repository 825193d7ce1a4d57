"""proclab.analyze.saliency: on a rollout, the frame gradients ``analyze saliency --real`` writes for the
recording of the same agent, levels and seed; another agent replays its own state up to the window; basis
targets; one-line refusals; the plot."""

import copy
import json
from dataclasses import replace

import numpy as np
import pytest

import proclab
from proclab.cli import main
from proclab.errors import ProclabError
from proclab.interpret.saliency.real_frames import Saliency, SaliencySettings, saliency
from proclab.interpret.states.hidden import HiddenSettings, hidden
from proclab.models.loading import load
from proclab.store import EpisodeStore
from support import make_agent_checkpoint, record, round_trip

SETTINGS = SaliencySettings(window=4, offset=2, step=2)
TARGETS = ["value", "action", "group:right"]


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    checkpoint = make_agent_checkpoint(root / "run", game="bigfish")  # short episodes
    agent = load(checkpoint, device="cpu", precision="fp32")
    store = record(checkpoint, root / "data", episodes=3, seed=5)
    ro = proclab.rollout(agent, episodes=3, num_envs=2, seed=5)
    return agent, ro, store, root


def test_the_function_gives_the_gradients_the_command_wrote(played):
    agent, ro, data, root = played
    out = root / "A"
    flags = ["--episodes", "0:3", "--window", "4", "--offset", "2", "--step", "2", "--strips", "0"]
    flags += ["--videos", "0", "--device", "cpu", "--precision", "fp32", "--torch-threads", "1"]
    targets = [f for t in TARGETS for f in ("--target", t)]
    main(["analyze", "saliency", "--real", "--out", str(out), "--data", str(data), *flags, *targets])
    written = EpisodeStore(out / "saliency" / "store.zarr")
    recorded = EpisodeStore(data)
    # a store keeps episodes as they ended, a rollout as they started: match them by level
    order = [int(np.flatnonzero(ro.levels == lv)[0]) for lv in recorded.episodes["level_seed"]]
    res = saliency(agent, rollout=ro, settings=replace(SETTINGS, targets=TARGETS, episodes=order))
    assert res.episodes == order and res.frames.shape == (3, 4, 3, 64, 64)
    for j in range(3):
        steps = written.read(
            j, ["obs", "action", *(f"grad/{k}/frame" for k in ("value", "action", "group_right"))]
        )
        np.testing.assert_array_equal(res.frames[j], steps["obs"])
        np.testing.assert_array_equal(res.actions[j], steps["action"])
        for spec in TARGETS:
            np.testing.assert_array_equal(res.grads[spec][j], steps[f"grad/{spec.replace(':', '_')}/frame"])
            assert res.values[spec][j] == written.info(j)[f"target/{spec.replace(':', '_')}"]
        assert not res.grads["value"][j, 3].any()  # a frame after the target step cannot move it
    summary = json.loads((out / "saliency" / "summary.json").read_text())
    assert summary == res.summary()


def test_another_agent_replays_its_own_state_before_the_window(played):
    agent, ro, _, _ = played
    own = saliency(agent, rollout=ro, settings=replace(SETTINGS, targets="value", episodes="0:2"))
    twin = copy.deepcopy(agent)  # the same weights, not the agent that played: its state is replayed
    replayed = saliency(twin, rollout=ro, settings=replace(SETTINGS, targets="value", episodes=[0, 1]))
    np.testing.assert_allclose(replayed.grads["value"], own.grads["value"], rtol=1e-4, atol=1e-7)


def test_basis_targets_the_table_the_plot_and_the_folder(played, tmp_path):
    agent, ro, _, _ = played
    basis = hidden(
        ro, "core.0.hook_h", settings=HiddenSettings(n_ics=2, clusters=2, nmf=2, perplexity=5.0)
    ).basis
    res = proclab.analyze.saliency(
        agent, rollout=ro, basis=basis, settings=replace(SETTINGS, targets=("ic:0-1", "value"))
    )
    assert isinstance(res, Saliency) and list(res.grads) == ["ic:0", "ic:1", "value"]
    assert [r["target"] for r in res.table()] == ["ic:0", "ic:1", "value"]
    assert len(res.plot(window=0).axes) == 3
    round_trip(res, tmp_path / "saliency")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (replace(SETTINGS, targets="ic:0"), "target ic:0 needs a basis"),
        (SaliencySettings(step=4, window=4), "--step 4 is outside the window's steps 0-3"),
        (SaliencySettings(method="lime"), "unknown --method 'lime'"),
        (SaliencySettings(window=5000, episodes=[0]), "episode 0 has"),
        (replace(SETTINGS, targets="valeu"), "unknown saliency target 'valeu'"),
    ],
)
def test_mistakes_are_one_line(played, settings, message):
    agent, ro, _, _ = played
    with pytest.raises(ProclabError, match=message):
        saliency(agent, rollout=ro, settings=settings)
