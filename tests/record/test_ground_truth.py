"""Ground truth in the store: the recorder's fast features and events equal proclab.envs.state's definitions,
land on the rows of the timestep convention, and each episode's stored first state replays the episode."""

import itertools

import numpy as np
import pytest

from proclab.cli import main
from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.envs.games import GAMES
from proclab.envs.state import event_names, events, feature_names, features, parse_state
from proclab.envs.state.sample import random_states
from proclab.record.ground_truth import GameTruth, ground_truth_names
from proclab.store import EpisodeStore
from proclab.store.schema import GROUND_TRUTH_ATTR
from support import make_agent_checkpoint

THREADS = ["--torch-threads", "1", "--device", "cpu"]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(((a == b) | (np.isnan(a) & np.isnan(b))).all())


@pytest.mark.parametrize("mode", ["easy", "hard"])
@pytest.mark.parametrize("game", GAMES)
def test_fast_features_and_events_are_the_definitions(game, mode):
    """40 states at random points of random levels; events between consecutive states of one env."""
    states = list(random_states(game, mode, 40, seed=3, num_envs=1, keep_prob=0.3))
    truth = GameTruth(game)
    seen = truth.see(states)
    parsed = [parse_state(s) for s in states]
    assert _same(seen.features, np.array([features(p) for p in parsed]))
    got = truth.events(truth.see(states[:-1]), truth.see(states[1:]))
    assert (got == np.array([events(a, b) for a, b in itertools.pairwise(parsed)])).all()
    assert truth.feature_names == feature_names(game) and truth.event_names == event_names(game)
    one_by_one = np.concatenate(
        [truth.see([s], keys=["slot"]).features for s in states]
    )  # grid reading reused
    assert _same(one_by_one, seen.features)


@pytest.fixture(scope="module")
def bigfish_store(helpers, tmp_path_factory):
    """Three episodes of an untrained agent on BigFish (short: small fish eat it)."""
    root = tmp_path_factory.mktemp("gt")
    ckpt = helpers.make_checkpoint(root / "ckpt", game="bigfish")
    store = root / "DATA"
    main(
        ["record", "--agent", str(ckpt), "--episodes", "3", "--num-envs", "2", "--out", str(store), *THREADS]
    )
    return EpisodeStore(store)


def test_the_stored_first_state_replays_the_episode_and_the_rows_follow_the_convention(bigfish_store):
    """Replaying each episode from its stored first state with its recorded actions gives its frames and
    rewards back; features[t] are those of the state obs_t was drawn from, events[t] those of action t."""
    store = bigfish_store
    names = store.shards[0].attrs[GROUND_TRUTH_ATTR]
    assert names == ground_truth_names(["bigfish"]) and store.blob_fields == ["initial_state"]
    for i in range(store.num_episodes):
        ep = store.episode(i)
        first = store.read_blob("initial_state", i)
        assert parse_state(first).header.current_level_seed == ep.info["level_seed"]
        with ProcgenVecEnv(EnvConfig(game=("bigfish",), num_envs=1, num_threads=1)) as env:
            env.reset()
            obs, _ = env.restart_slots({0: first})
            states = [parse_state(env.slot_states()[0])]
            for t, action in enumerate(ep["action"]):
                assert (obs[0] == ep["obs"][t]).all(), f"episode {i}: frame {t} differs"
                obs, reward, terminated, _truncated, _ = env.step(np.array([action], np.int32))
                assert reward[0] == ep["reward"][t] and terminated[0] == ep["terminated"][t]
                states.append(parse_state(env.slot_states()[0]))
        assert _same(ep["features"], np.array([features(s) for s in states[:-1]]))
        within = np.array([events(a, b) for a, b in itertools.pairwise(states[:-1])])
        assert (ep["events"][:-1] == within).all()
        last = dict(zip(names["events"], ep["events"][-1], strict=True))
        assert (
            last["reward"] == (ep["reward"][-1] != 0) and last["level_complete"] == ep.info["level_complete"]
        )
        assert last["died"] == (ep["terminated"][-1] and not ep.info["level_complete"])
        assert not any(v for k, v in last.items() if k.endswith(("_removed", "_added")))


def test_no_ground_truth_stores_none(helpers, tmp_path):
    ckpt = helpers.make_checkpoint(tmp_path / "ckpt", game="bigfish")
    main(
        [
            "record",
            "--agent",
            str(ckpt),
            "--episodes",
            "1",
            "--num-envs",
            "1",
            "--out",
            str(tmp_path / "D"),
            "--no-ground-truth",
            *THREADS,
        ]
    )
    store = EpisodeStore(tmp_path / "D")
    assert "features" not in store.step_fields and "events" not in store.step_fields and not store.blob_fields
    assert GROUND_TRUTH_ATTR not in store.shards[0].attrs


def test_record_levels_from_plays_the_files_levels(tmp_path, coin_file):
    """Every episode starts from a state of the file (the coin surrounds the agent: one step that pays), and the
    stored first state is the file's level (drawn with the agent's options: no backgrounds)."""
    from proclab.levels.file import read_level_states

    ckpt = make_agent_checkpoint(tmp_path / "run", game="coinrun")  # trained without backgrounds
    main(["record", "--agent", str(ckpt), "--episodes", "4", "--num-envs", "2", "--out", str(tmp_path / "D"),
          "--levels-from", str(coin_file), *THREADS])  # fmt: skip
    store = EpisodeStore(tmp_path / "D")
    assert store.episodes["length"].tolist() == [1] * 4 and (store.episodes["return"] >= 10).all()
    assert set(store.episodes["split"]) == {f"levels:{coin_file}"}
    file_states = {s.level_seed: parse_state(s.data) for s in read_level_states(coin_file).states}
    for i in range(4):
        first = parse_state(store.read_blob("initial_state", i))
        original = file_states[int(store.episodes["level_seed"][i])]
        assert (first.grid == original.grid).all() and first.entities == original.entities
        assert first.header.use_backgrounds == 0 and original.header.use_backgrounds == 1
        outcome = dict(
            zip(
                store.shards[0].attrs[GROUND_TRUTH_ATTR]["events"], store.episode(i)["events"][0], strict=True
            )
        )
        assert outcome["reward"] and outcome["level_complete"] and not outcome["died"]


def test_level_export_gives_the_recorded_first_states_to_play_again(bigfish_store, tmp_path, capsys):
    """``proclab level export``: the chosen episodes' first states, in order; played with --levels-from,
    each starts on the episode's recorded first frame."""
    from proclab.levels.file import read_level_states
    from proclab.levels.play import LevelsEnv

    out = tmp_path / "ep.levels.json"
    main(
        [
            "level",
            "export",
            "--data",
            str(bigfish_store.path),
            "--episode",
            "2",
            "--episode",
            "0",
            "--out",
            str(out),
        ]
    )
    levels = read_level_states(out, game="bigfish", mode="easy")
    assert [s.data for s in levels.states] == [bigfish_store.read_blob("initial_state", i) for i in (2, 0)]
    with LevelsEnv(ProcgenVecEnv(EnvConfig(game=("bigfish",), num_envs=2, num_threads=1)), levels) as env:
        obs, _ = env.reset()
    assert (obs[0] == bigfish_store.episode(2)["obs"][0]).all() and (
        obs[1] == bigfish_store.episode(0)["obs"][0]
    ).all()
    with pytest.raises(SystemExit):
        main(
            [
                "level",
                "export",
                "--data",
                str(bigfish_store.path),
                "--episode",
                "7",
                "--out",
                str(tmp_path / "x.json"),
            ]
        )
    assert "episode 7 is not in" in capsys.readouterr().err


def test_multi_task_columns_are_the_union_of_the_games_names():
    """Two games in one env: each slot's columns of its game hold the definitions' values, the other
    game's own columns NaN (features) or false (events)."""
    from proclab.record.ground_truth import GroundTruth

    with ProcgenVecEnv(EnvConfig(game=("bigfish", "maze"), num_envs=4, num_threads=1)) as env:
        env.reset()
        truth = GroundTruth(env)
        assert truth.feature_names == ground_truth_names(["bigfish", "maze"])["features"]
        before = [parse_state(s) for s in env.slot_states()]
        got = truth.features()
        _, reward, terminated, truncated, info = env.step(np.zeros(4, np.int32))
        happened = truth.step(reward, terminated, truncated, info["episode"]["level_complete"])
        after = [parse_state(s) for s in env.slot_states()]
    for slot, (a, b) in enumerate(zip(before, after, strict=True)):
        mine = [truth.feature_names.index(n) for n in feature_names(a.game)]
        assert _same(got[slot, mine], features(a))
        others = np.setdiff1d(np.arange(len(truth.feature_names)), mine)
        assert np.isnan(got[slot, others]).all()
        cols = [truth.event_names.index(n) for n in event_names(a.game)]
        if not (terminated[slot] or truncated[slot]):
            assert (happened[slot, cols] == events(a, b)).all()
        assert not happened[slot, np.setdiff1d(np.arange(len(truth.event_names)), cols)].any()
