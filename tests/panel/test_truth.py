"""Ground-truth markers of the episode viewer: the recorded features through the camera of the recorded
first state equal the positions of the replayed episode's own states through their own cameras."""

import numpy as np
import pytest

from proclab.cli import main
from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.state import glossary, parse_state, positions, to_pixels
from proclab.panel.truth import truth_markers
from proclab.store import EpisodeStore
from store_fixtures import write_store
from support import make_agent_checkpoint


@pytest.fixture(scope="module")
def coinrun_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("truth")
    ckpt = make_agent_checkpoint(root / "run", game="coinrun")
    main(["record", "--agent", str(ckpt), "--episodes", "2", "--num-envs", "2", "--out", str(root / "D"),
          "--device", "cpu", "--torch-threads", "1"])  # fmt: skip
    return EpisodeStore(root / "D")


def _replayed_states(store, e: int) -> list:
    """Episode ``e`` played again from its first state with its recorded actions: the state of every step."""
    actions = store.read(e, ["action"])["action"]
    with ProcgenVecEnv(EnvConfig(game=("coinrun",), num_envs=1, num_threads=1)) as env:
        env.reset()
        env.restart_slots({0: store.read_blob("initial_state", e)})
        states = [parse_state(env.slot_states()[0])]
        for a in actions[:-1]:
            env.step(np.array([a], np.int32))
            states.append(parse_state(env.slot_states()[0]))
    return states


def test_markers_are_the_replayed_states_positions_in_pixels(coinrun_store):
    store = coinrun_store
    e = int(np.argmax(store.episodes["length"]))
    T = min(int(store.episodes["length"][e]), 40)
    got = truth_markers(store, e, 0, T)
    names = got["names"]
    assert names[:2] == ["agent", "goal"] and "saw" in names and "coin" in names
    states = _replayed_states(store, e)[:T]
    for t, state in enumerate(states):
        agent = state.agent
        coin = positions(state, glossary("coinrun").goal)[0]
        expected = {"agent": to_pixels(state, agent.x, agent.y), "goal": to_pixels(state, *coin)}
        for name, (px, py) in expected.items():
            m = names.index(name)
            assert got["x"][t][m] == pytest.approx(px, abs=0.01) and got["y"][t][m] == pytest.approx(
                py, abs=0.01
            )
        found = positions(state, "saw")
        m = names.index("saw")
        if len(found) == 0:
            assert got["x"][t][m] is None
        else:
            nearest = found[np.argmin(np.hypot(*(found - (agent.x, agent.y)).T))]
            assert got["x"][t][m] == pytest.approx(to_pixels(state, *nearest)[0], abs=0.01)


def test_a_store_without_ground_truth_has_no_markers(tmp_path):
    store = EpisodeStore(write_store(tmp_path / "s", [[3, 5]]))
    assert truth_markers(store, 0, 0, 3) is None
