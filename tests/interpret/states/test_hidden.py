"""proclab.analyze.hidden: the numbers ``analyze hidden`` writes for the same states; on a rollout (states
and cached hooks), its basis taken by the sweep; one-line refusals; save and plot."""

import json

import numpy as np
import pytest

import proclab
from proclab.cli import main
from proclab.errors import ProclabError
from proclab.interpret.bases.activations import read_activation, store_source
from proclab.interpret.bases.coordinates import LinearCoordinates
from proclab.interpret.bases.pca_ica import Basis
from proclab.interpret.states.command import _step_attributes
from proclab.interpret.states.hidden import Hidden, HiddenSettings, hidden
from proclab.io.results import ARRAYS, RESULT_JSON, jsonable
from proclab.store import EpisodeStore
from support import make_agent_checkpoint, round_trip

SMALL = ["--n-ics", "4", "--clusters", "4", "--nmf", "3", "--perplexity", "10", "--fit-points", "150"]
SETTINGS = HiddenSettings(n_ics=4, clusters=4, nmf=3, perplexity=10.0, fit_points=150)
SUMMARY_ONLY = {"data", "samples", "episodes", "seconds", "wall_seconds"}  # the command's own facts


@pytest.fixture(scope="module")
def command(gru_store, sample_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("hidden") / "A"
    data = ["--data", str(gru_store), "--samples", str(sample_store)]
    main(["analyze", "hidden", *data, "--out", str(out), *SMALL, "--no-plots"])
    return out


def test_the_function_gives_the_numbers_the_command_wrote(command, gru_store, sample_store, tmp_path):
    store = EpisodeStore(gru_store)
    episodes = np.arange(store.num_episodes)
    acts = read_activation(store, store_source(store, "core.0.hook_h"), episodes)  # the recorded state
    res = hidden(acts, settings=SETTINGS, attributes=_step_attributes(store, episodes),
                 samples=EpisodeStore(sample_store))  # fmt: skip
    saved = Basis.load(command / "basis.npz")
    for name in ("mean", "std", "pca_mean", "components", "pc_var", "unmixing"):
        np.testing.assert_array_equal(getattr(res.basis, name), getattr(saved, name), err_msg=name)
    for file, arrays in (("hidden.npz", res.arrays), ("generated.npz", res.generated_arrays)):
        written = np.load(command / "hidden" / file)
        assert set(written) == set(arrays)
        for k in written:
            np.testing.assert_array_equal(arrays[k], written[k], err_msg=f"{file}: {k}")
    summary = json.loads((command / "hidden" / "summary.json").read_text())
    assert {k: v for k, v in summary.items() if k not in SUMMARY_ONLY} == json.loads(
        json.dumps(jsonable(res.summary()))
    )
    written = np.load(command / "nmf.npz")
    np.testing.assert_array_equal(written["components"], res.nmf_components)
    np.testing.assert_array_equal(written["shift"], res.nmf_shift)
    round_trip(res, tmp_path / "hidden")  # with the generated states' arrays and drift


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    agent = proclab.load(
        make_agent_checkpoint(tmp_path_factory.mktemp("run") / "run", game="bigfish"), "cpu", "fp32"
    )
    return agent, proclab.rollout(
        agent, levels="0:20", episodes=4, num_envs=4, seed=1, cache=["torso.hook_fc"]
    )


def test_a_rollout_is_read_episode_by_episode_and_its_basis_is_the_sweeps(played, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    agent, ro = played
    res = proclab.analyze.hidden(ro, "core.0.hook_h", settings=SETTINGS)
    n = int(ro.mask.sum())
    assert res.points == n and res.activation == "state_out/core.0.h" and res.dim == 16
    episode, step = res.arrays["episode"], res.arrays["step"]
    assert list(np.bincount(episode)) == list(ro.lengths) and (np.diff(episode) >= 0).all()
    h = ro.cache["core.0.hook_h"][step, episode].numpy()
    np.testing.assert_allclose(res.arrays["ics"], res.basis.to_ics(h), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(res.arrays["action"], ro.actions[step, episode].numpy())
    assert res.arrays["last"].sum() == ro.num_episodes  # one last step per episode
    # the same rows as an array: the same fits
    again = hidden(h, "core.0.hook_h", settings=SETTINGS)
    np.testing.assert_array_equal(again.arrays["ics"], res.arrays["ics"])
    # a cached hook point is analysed too
    fc = hidden(ro, "torso.hook_fc", settings=SETTINGS)
    assert fc.activation == "hook:torso.hook_fc" and fc.dim == 32
    # the sweep takes the basis as it is
    settings = proclab.analyze.SweepSettings(levels=2, arms="p95", permutations=20, bootstrap=20, rows=8,
                                             directions="0")  # fmt: skip
    sweep = proclab.analyze.sweep(agent, "core.0.hook_h", basis=res.basis, rollout=ro, settings=settings)
    assert [r["direction"] for r in sweep.summary["results"]] == [0]
    assert LinearCoordinates(res.basis, "ica").k == 4
    assert list(tmp_path.iterdir()) == []


def test_save_keeps_the_basis_load_gives_it_back_and_plot_draws(played, tmp_path):
    _, ro = played
    res = hidden(ro, "core.0.hook_h", settings=SETTINGS)
    loaded = round_trip(res, tmp_path / "r")  # the basis too, from basis.npz
    folder = tmp_path / "r"
    assert {p.name for p in folder.iterdir()} == {RESULT_JSON, ARRAYS, "basis.npz"}
    np.testing.assert_array_equal(loaded.basis.unmixing, res.basis.unmixing)
    assert json.loads((folder / RESULT_JSON).read_text())["pcs_to_95"] == res.pcs_to_95
    assert isinstance(res, Hidden) and res.table()[0] == {"quantity": "points", "value": res.points}
    fig = res.plot(points=200)
    assert len(fig.axes) >= 6  # one panel per colouring (and colour bars)


@pytest.mark.parametrize(
    ("key", "settings", "message"),
    [
        ("core.0.hook_c", SETTINGS, "the rollout cached no hook 'core.0.hook_c'"),
        ("core.0.h", SETTINGS, "'core.0.h' is a state key; name its hook point, 'core.0.hook_h'"),
        ("core.0.hook_h", HiddenSettings(clusters=100_000), "100000 clusters asked of"),
    ],
)
def test_mistakes_are_one_line(played, key, settings, message):
    with pytest.raises(ProclabError, match=message):
        hidden(played[1], key, settings=settings)
