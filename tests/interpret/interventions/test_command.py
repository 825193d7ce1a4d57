"""analyze intervene: identity in the real env replays the baseline exactly; the simulation arms are paired."""

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from proclab.cli import main as cli
from proclab.interpret.bases.coordinates import LinearCoordinates
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.interventions.command import ArmEpisodes, compare_real
from proclab.interpret.interventions.direction_edits import DirectionEdit
from proclab.interpret.stats.paired import frequency_changes, mean_change
from proclab.interpret.workspace.folder import Workspace
from proclab.models.edited import Intervened
from proclab.models.loading import freeze
from proclab.run.runtime import make_runtime
from proclab.stats.bootstrap import resamples
from proclab.store import EpisodeStore
from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.simulate import dreamed
from support import make_agent_checkpoint


def folder(path, checkpoint=None):
    x = np.random.default_rng(0).normal(size=(400, 16)) @ np.random.default_rng(1).normal(size=(16, 16)) * 0.2
    path.mkdir(parents=True)
    ws = Workspace.open(path)
    ws.require_inputs(activation="state_out/core.0.h", checkpoint=checkpoint)
    basis = Basis.fit(x, BasisConfig(n_ics=4), {})
    basis.save(ws.basis_path)
    (path / "hidden").mkdir()
    np.savez(path / "hidden" / "hidden.npz", ics=basis.to_ics(x), pcs=basis.to_pcs(x))  # the recorded states
    ws.record_command("hidden", {}, [], 0.0)
    return path


@pytest.mark.heavy
def test_identity_in_the_real_env_replays_the_baseline(tmp_path, capsys):
    ckpt = make_agent_checkpoint(tmp_path / "agent", game="bossfight")
    out = folder(tmp_path / "analysis", ckpt)
    cli(
        [
            "analyze",
            "intervene",
            "--out",
            str(out),
            "--move",
            "1:1",
            "--episodes",
            "3",
            "--num-envs",
            "3",
            "--split",
            "0:50",
            "--videos",
            "1",
            "--bootstrap",
            "200",
            "--torch-threads",
            "1",
        ]
    )
    assert "outputs in" in capsys.readouterr().out
    base, inter = (EpisodeStore(out / "intervene" / "real" / f"{a}.zarr") for a in ("baseline", "intervened"))
    assert base.num_episodes == inter.num_episodes == 3
    order = np.argsort(base.episodes["level_seed"]), np.argsort(inter.episodes["level_seed"])
    for key in ("level_seed", "return", "length"):
        np.testing.assert_array_equal(base.episodes[key][order[0]], inter.episodes[key][order[1]])
    for i, j in zip(*order, strict=True):
        np.testing.assert_array_equal(
            base.read(int(i), ["action"])["action"], inter.read(int(j), ["action"])["action"]
        )
    summary = json.loads((out / "intervene" / "summary.json").read_text())
    real = summary["real"]
    assert summary["intervention"] == "move 1:1" and real["return"]["change"] == 0
    assert real["actions"]["tv_distance"]["value"] == 0 and not real["length"]["significant"]
    assert (out / "intervene" / "real_actions.png").is_file() and list(
        (out / "intervene" / "videos").glob("*.mp4")
    )


def test_simulated_identity_is_bit_identical_and_the_command_pairs_samples(wm_run, samples, tmp_path):
    wm, agent, _ = load_world_model(wm_run, make_runtime("cpu", "fp32", 1))
    freeze(wm)
    out = folder(tmp_path / "analysis")
    basis = Workspace.open(out).basis()
    b = torch.from_numpy(np.stack([EpisodeStore(samples).info(i)["bottleneck"] for i in range(3)]))
    identity = DirectionEdit.parse("exchange", "2:2").intervention(
        LinearCoordinates(basis, "pca"), "core.0.h"
    )
    same = Intervened(agent, [identity])
    with torch.no_grad():
        plain, edited = dreamed(wm, agent, b, 6), dreamed(wm, same, b, 6)
    for name in ("frame", "logits", "value", "agent_state", "env_h"):
        assert torch.equal(getattr(plain, name), getattr(edited, name)), name
    cli(
        [
            "analyze",
            "intervene-sim",
            "--out",
            str(out),
            "--collapse",
            "0",
            "--samples",
            str(samples),
            "--n",
            "4",
            "--videos",
            "1",
            "--bootstrap",
            "100",
            "--torch-threads",
            "1",
        ]
    )
    sim = json.loads((out / "intervene-sim" / "summary.json").read_text())["sim"]
    assert sim["samples"] == 4 and set(sim["actions"]["per_category"]) >= {"right", "up"}
    assert "behaviours_note" in sim and "ci95" in sim["predicted_return"]
    stores = [EpisodeStore(out / "intervene-sim" / "sim" / f"{a}.zarr") for a in ("baseline", "intervened")]
    np.testing.assert_array_equal(
        stores[0].read(0, ["obs"])["obs"], EpisodeStore(samples).read(0, ["obs"])["obs"]
    )
    assert (out / "intervene-sim" / "sim_actions.png").is_file() and list(
        (out / "intervene-sim" / "videos").glob("sim_*.mp4")
    )
    with pytest.raises(SystemExit):
        cli(["analyze", "intervene-sim", "--out", str(out), "--collapse", "0", "--move", "1:2"])


def test_paired_bootstrap_against_a_loop():
    rng = np.random.default_rng(0)
    base, inter = rng.normal(size=30), rng.normal(size=30) + 0.8
    idx = resamples(30, 500, 1)
    ci = mean_change(base, inter, idx)["ci95"]
    loop = [np.mean([inter[k] - base[k] for k in row]) for row in idx]
    assert ci == pytest.approx(list(np.percentile(loop, [2.5, 97.5])))
    counts_b, counts_i = rng.integers(0, 5, (30, 3)), rng.integers(0, 5, (30, 3))
    f = frequency_changes(counts_b, counts_i, idx, ["a", "b", "c"])
    pooled = [
        sum(counts_i[k] for k in row) / sum(counts_i[k].sum() for k in row)
        - sum(counts_b[k] for k in row) / sum(counts_b[k].sum() for k in row)
        for row in idx
    ]
    assert f["per_category"]["b"]["ci95"] == pytest.approx(
        list(np.percentile([p[1] for p in pooled], [2.5, 97.5]))
    )
    arm = ArmEpisodes(np.array([5, 5, 7]), np.zeros(3), np.zeros(3), np.ones(3), np.ones((3, 2), int))
    other = ArmEpisodes(np.array([5, 7, 7]), np.zeros(3), np.zeros(3), np.ones(3), np.ones((3, 2), int))
    with pytest.raises(RuntimeError, match="different levels"):
        compare_real(arm, other, 10, 0)


def test_sweep_command_pairs_procgen_levels_and_writes_its_outputs(tmp_path, capsys):
    """analyze sweep on a tiny agent: the baseline's episodes equal each level played alone in
    a fresh one-level env; the table is printed, and the JSON, CSV, plot and arrays agree."""
    from proclab.envs import LevelSplit, ProcgenVecEnv
    from proclab.models.loading import load_agent

    ckpt = make_agent_checkpoint(tmp_path / "agent", game="chaser")  # short episodes
    out = folder(tmp_path / "analysis", ckpt)
    args = [
        "--directions",
        "0:2",
        "--arms",
        "mean,collapse",
        "--levels",
        "3",
        "--rows",
        "6",
        "--split",
        "0:50",
        "--precision",
        "fp32",  # the reference below steps the agent in fp32
    ]
    cli(
        [
            "analyze",
            "sweep",
            "--out",
            str(out),
            *args,
            "--bootstrap",
            "100",
            "--permutations",
            "50",
        ]
    )
    printed = capsys.readouterr().out
    folder_out = out / "sweep"
    summary = json.loads((folder_out / "sweep.json").read_text())
    assert summary["format"] == "proclab-intervention-sweep" and summary["game"] == "chaser"
    assert summary["precision"] == "fp32"
    assert len(summary["results"]) == 4 and summary["directions"] == [0, 1]
    assert {r["arm"] for r in summary["results"]} == {"mean", "collapse"}
    assert summary["correction"]["method"] == "holm" and summary["correction"]["tests_per_family"] == 2
    assert (folder_out / "sweep_table.txt").read_text() in printed and "outputs in" in printed
    assert (folder_out / "sweep.png").is_file() and len(
        (folder_out / "sweep_table.csv").read_text().splitlines()
    ) == 5
    arrays = np.load(folder_out / "episodes.npz")
    assert arrays["ret"].shape == (5, 3) and list(arrays["levels"]) == summary["levels"]
    assert all(0 <= lv < 50 for lv in summary["levels"])
    agent, env_config, _ = load_agent(ckpt, make_runtime("cpu", "fp32", 1))
    for k, level in enumerate(summary["levels"]):
        env = ProcgenVecEnv(replace(env_config, num_envs=1), seed=0, split=LevelSplit(level, 1))
        obs, _ = env.reset()
        state, first, ret, length = agent.initial_state(1), torch.ones(1, dtype=torch.bool), 0.0, 0
        while True:
            with torch.no_grad():
                o, state = agent.step(torch.from_numpy(obs), state, first)
            obs, reward, term, trunc, _ = env.step(o.logits.argmax(1).numpy())
            ret, length, first = ret + reward[0], length + 1, torch.zeros(1, dtype=torch.bool)
            if term[0] or trunc[0]:
                break
        env.close()
        assert (arrays["ret"][0, k], arrays["length"][0, k]) == (ret, length)
    record = json.loads((out / "analysis.json").read_text())["commands"]["sweep"]
    assert "sweep/sweep.json" in record["outputs"]
    # in two parts, one process each: the first to finish says what is missing, the last writes the sweep
    parted = ["analyze", "sweep", "--out", str(out), *args, "--bootstrap", "100", "--permutations", "50", "--parts", "2"]  # fmt: skip
    cli([*parted, "--part", "2", "--torch-threads", "1"])
    assert "1 of 2 parts saved" in capsys.readouterr().out
    assert json.loads((folder_out / "sweep.json").read_text())["parts"] == 1  # the earlier sweep still stands
    cli([*parted, "--part", "1"])
    again = np.load(folder_out / "episodes.npz")
    for name in ("ret", "length", "level_complete", "actions"):
        np.testing.assert_array_equal(again[name], arrays[name])
    resumed = json.loads((folder_out / "sweep.json").read_text())
    plain = lambda rows: [{k: v for k, v in r.items() if k != "landing"} for r in rows]  # noqa: E731
    # landing samples are drawn per block, everything else is the one-part sweep's
    assert resumed["parts"] == 2 and plain(resumed["results"]) == plain(summary["results"])
    with pytest.raises(SystemExit):  # blocks of another sweep are refused, in one line
        cli([*parted, "--seed", "3"])
    assert "holds the parts of another sweep (levels, seed differ)" in capsys.readouterr().err


def test_intervene_places_its_edit_and_warns_once_when_it_leaves_the_data(tmp_path, capsys):
    ckpt = make_agent_checkpoint(tmp_path / "agent", game="bossfight")
    out = folder(tmp_path / "analysis", ckpt)
    hidden = dict(np.load(out / "hidden" / "hidden.npz"))
    np.savez(
        out / "hidden" / "hidden.npz", ics=hidden["ics"] + 50.0, pcs=hidden["pcs"]
    )  # the start state: far off
    common = ["--episodes", "2", "--num-envs", "2", "--split", "0:50", "--videos", "0"]
    cli(["analyze", "intervene", "--out", str(out), "--collapse", "1", *common, "--bootstrap", "50"])
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "IC 1" in err
    placed = json.loads((out / "intervene" / "summary.json").read_text())["real"]["edit"]["IC 1"]
    assert placed["off_data"] and placed["percentile"] == 0
    cli(["analyze", "intervene", "--out", str(out), "--hold", "2:p95", *common, "--bootstrap", "50"])
    assert "warning:" not in capsys.readouterr().err
    summary = json.loads((out / "intervene" / "summary.json").read_text())
    assert summary["intervention"] == "hold 2:p95"
    assert summary["real"]["edit"]["IC 2"]["percentile"] == pytest.approx(95, abs=0.5)
    with pytest.raises(SystemExit):
        cli(["analyze", "intervene", "--out", str(out), "--hold", "2:resample", *common])


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--arms", "mean,bogus"], "unknown arm 'bogus'"),
        (["--correction", "bonferroni"], "--correction"),
        (["--levels", "300", "--split", "test1"], "which has 200"),
        (["--directions", "0:9"], "direction range"),
        (["--directions", "none"], "nothing to play"),
        (["--swaps", "3-7"], "--swaps '3-7': expected I:J"),
        (["--swaps", "0:9"], "direction 9 is outside"),
        (["--swaps", "saw:1"], "does not exist; run `proclab analyze atlas`"),
        (["--random-swaps", "20"], "--random-swaps is the control of the chosen --swaps"),
        (["--death-radius", "-1"], "--death-radius must be >= 0"),
        (["--parts", "2", "--part", "3"], "--part must be between 1 and --parts (2)"),
        (["--levels", "3", "--parts", "4"], "--parts must be between 1 and the number of levels (3)"),
    ],
)
def test_sweep_mistakes_are_one_line(tmp_path, capsys, flags, message):
    ckpt = make_agent_checkpoint(tmp_path / "agent", game="chaser")
    out = folder(tmp_path / "analysis", ckpt)
    with pytest.raises(SystemExit) as exc:
        cli(["analyze", "sweep", "--out", str(out), *flags])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and message in err
    assert not (out / "sweep").exists()


def test_sweep_levels_from_plays_the_files_states_as_the_paired_levels(tmp_path):
    """--levels-from: the paired levels are the file's states, in order; a saved level plays exactly as the
    same level drawn from a split (the baseline's return and length on it are those of --split SEED:1)."""
    from proclab.levels.file import level_states, write_level_states
    from proclab.levels.level import generate_level

    ckpt = make_agent_checkpoint(tmp_path / "agent", game="chaser")  # trained without backgrounds
    path = write_level_states(
        tmp_path / "two.levels.json",
        level_states("chaser", "easy", [generate_level("chaser", "easy", s) for s in (7, 11)]),
    )
    small = [
        "--directions",
        "0",
        "--arms",
        "mean",
        "--rows",
        "4",
        "--bootstrap",
        "50",
        "--permutations",
        "20",
    ]
    runs = {}
    for name, flags in {"file": ["--levels-from", str(path)], "7": ["--split", "7:1", "--levels", "1"],
                        "11": ["--split", "11:1", "--levels", "1"]}.items():  # fmt: skip
        out = folder(tmp_path / f"analysis-{name}", ckpt)
        cli(["analyze", "sweep", "--out", str(out), *small, *flags])
        runs[name] = (
            json.loads((out / "sweep" / "sweep.json").read_text()),
            np.load(out / "sweep" / "episodes.npz"),
        )
    summary, arrays = runs["file"]
    assert summary["levels"] == [0, 1] and summary["levels_from"] == str(path) and summary["split"] is None
    for k, seed in enumerate(("7", "11")):
        alone = runs[seed][1]
        assert arrays["ret"][0, k] == alone["ret"][0, 0] and arrays["length"][0, k] == alone["length"][0, 0]


@pytest.mark.slow  # make test-all: 17 s; swaps and deaths have their own tests
def test_sweep_swaps_directions_picked_from_the_atlas_and_counts_deaths_by_cause(tmp_path, capsys):
    """--swaps saw:crate,0:1 on CoinRun: the kinds are the atlas's directions that track their proximity most
    strongly (picked here by hand from the same atlas), every swap is a variant on the same levels, and each
    variant's deaths by cause agree with its episodes (died: not completed, not timed out)."""
    from proclab.interpret.workspace.systems import file_digest

    ckpt = make_agent_checkpoint(tmp_path / "agent", game="coinrun")
    out = folder(tmp_path / "analysis", ckpt)
    r0 = {"gt saw proximity": [0.1, -0.5, 0.4, 0.45], "gt crate proximity": [0.2, 0.6, 0.05, 0.3]}
    cards = [
        {
            "direction": m,
            "tracks": [
                {"quantity": q, "r0": r[m], "ci0": [r[m] - 0.1, r[m] + 0.1], "tracked": True}
                for q, r in r0.items()
            ],
        }
        for m in range(4)
    ]
    atlas = {
        "basis": "ica",
        "basis_digest": file_digest(out / "basis.npz"),
        "quantities": list(r0),
        "cards": cards,
    }
    (out / "atlas").mkdir()
    (out / "atlas" / "atlas.json").write_text(json.dumps(atlas))
    small = ["--directions", "0", "--arms", "mean", "--levels", "3", "--rows", "12", "--split", "0:50"]
    stats = ["--bootstrap", "50", "--permutations", "20", "--no-greedy", "--torch-threads", "1"]
    cli(["analyze", "sweep", "--out", str(out), *small, *stats, "--swaps", "saw:crate,0:1"])
    printed = capsys.readouterr().out
    summary = json.loads((out / "sweep" / "sweep.json").read_text())
    # by hand: saw -> |r| largest at IC 1 (-0.5); crate -> IC 1 is taken, next IC 3 (0.3)
    assert [s["swap"] for s in summary["swaps"]] == [[1, 3], [0, 1]]
    assert [p["direction"] for p in summary["swaps_picked"]] == [1, 3]
    assert "IC 1 <-> IC 3" in printed and "picked for saw" in printed
    arrays = np.load(out / "sweep" / "episodes.npz")
    assert arrays["ret"].shape == (4, 3) and arrays["swap"].tolist()[2:] == [[1, 3], [0, 1]]
    died = (arrays["level_complete"] == 0) & ~arrays["timed_out"]
    deaths = summary["deaths"]
    assert deaths["causes"] == ["any", "saw", "enemy", "lava", "unclear"]
    assert deaths["baseline"]["any"] == pytest.approx(died[0].mean())
    causes = list(arrays["death_causes"])
    for c in deaths["causes"][1:]:
        mine = died & (arrays["death_cause"] == causes.index(c))
        assert deaths["baseline"][c] == pytest.approx(mine[0].mean())
        for k, row in enumerate(summary["swaps"], start=2):
            assert row["deaths"][c]["change"] == pytest.approx(mine[k].mean() - mine[0].mean())
    only = ["--directions", "none", "--swaps", "0:1", "--no-deaths", *small[2:]]  # the baseline and one swap
    cli(["analyze", "sweep", "--out", str(out), *only, *stats])
    alone = json.loads((out / "sweep" / "sweep.json").read_text())
    assert (
        alone["deaths"] is None and alone["results"] == [] and [s["swap"] for s in alone["swaps"]] == [[0, 1]]
    )
    assert np.load(out / "sweep" / "episodes.npz")["ret"].shape == (2, 3)
    assert "no direction held" in capsys.readouterr().out
    # the control: saw:crate (ICs 1 and 3) among 3 random pairs of the 4 ICs, deaths on saws ranked from the episodes
    cli(["analyze", "sweep", "--out", str(out), "--directions", "none", "--swaps", "saw:crate", "--random-swaps",
         "3", *small[4:], *stats])  # fmt: skip
    printed = capsys.readouterr().out
    controlled = json.loads((out / "sweep" / "sweep.json").read_text())
    arrays = np.load(out / "sweep" / "episodes.npz")
    pairs = arrays["swap"].tolist()[1:]
    assert pairs[0] == [1, 3] and len({tuple(sorted(q)) for q in pairs}) == 4 and [1, 3] not in pairs[1:]
    assert [s["random"] for s in controlled["swaps"]] == [False, True, True, True]
    died = (arrays["level_complete"] == 0) & ~arrays["timed_out"]
    saw = (died & (arrays["death_cause"] == list(arrays["death_causes"]).index("saw"))).astype(float)
    (row,) = controlled["swap_control"]
    ranked = row["metrics"]["deaths:saw"]
    changes = saw.mean(axis=1) - saw[0].mean()
    assert row["swap"] == [1, 3] and ranked["change"] == pytest.approx(changes[1])
    assert ranked["rank"] == 1 + int(np.sum(changes[2:] > changes[1])) and ranked["of"] == 4
    assert ranked["p_upper"] == pytest.approx((1 + np.sum(changes[2:] >= changes[1])) / 4)
    assert "IC 1 <-> IC 3 against 3 random pairs" in printed and "random IC" in printed
    with pytest.raises(SystemExit):
        cli(["analyze", "sweep", "--out", str(out), *only, "--random-swaps", "6"])
    assert "--random-swaps 6: a basis of 4 directions has only 5 pairs" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli(["analyze", "sweep", "--out", str(out), *small, "--swaps", "lava:crate"])
    assert "no quantity 'gt lava proximity'" in capsys.readouterr().err
