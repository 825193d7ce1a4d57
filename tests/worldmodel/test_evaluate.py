"""`proclab wm evaluate`: each statistic against a slow, written-out reference, and the command end to end."""

import csv
import itertools
import json

import numpy as np
import pytest
import torch
from PIL import Image
from scipy import stats
from torch.utils.data import default_collate

from proclab.errors import ProclabError
from proclab.run.runtime import RuntimeConfig, make_runtime
from proclab.store import EpisodeStore
from proclab.worldmodel.batch import make_batch, synthetic_batch
from proclab.worldmodel.checkpoint import TrainedWorldModel, load_world_model
from proclab.worldmodel.clustered import auc, clustered_auc, clustered_mean, correlations
from proclab.worldmodel.command import EvaluateArgs
from proclab.worldmodel.config import WorldModelConfig
from proclab.worldmodel.evaluation import (
    EvaluationSettings,
    StripSettings,
    evaluate_into,
    expected_returns,
    frame_rows,
    frame_table,
)
from proclab.worldmodel.frame_error import prediction_strip
from proclab.worldmodel.model import Trajectory
from proclab.worldmodel.state_drift import nearest_other_episode
from support import benchmark


def _clustered_reference(x, g):
    """Cluster-robust interval written out: per-cluster sums of residuals, the G/(G-1) factor, t(G-1)."""
    keep = [i for i in range(len(x)) if not np.isnan(x[i])]
    xs, gs = [x[i] for i in keep], [g[i] for i in keep]
    n = len(xs)
    mean = sum(xs) / n
    groups = sorted(set(gs))
    total = 0.0
    for c in groups:
        s = sum(xs[i] - mean for i in range(n) if gs[i] == c)
        total += s * s
    G = len(groups)
    se = (G / (G - 1) * total) ** 0.5 / n
    half = stats.t.ppf(0.975, G - 1) * se
    return mean, (mean - half, mean + half)


def test_clustered_interval_matches_the_written_out_sandwich_and_drops_nans():
    rng = np.random.default_rng(0)
    g = rng.integers(0, 7, 60)
    x = rng.normal(size=60) + g * 0.3  # episodes differ: the clustered interval must be wider
    x[[3, 17]] = np.nan
    got = clustered_mean(x, g)
    mean, ci = _clustered_reference(x, g)
    assert got["mean"] == pytest.approx(mean) and got["ci95"] == pytest.approx(ci)
    assert got["n"] == 58 and got["clusters"] == 7
    naive = 1.96 * np.nanstd(x, ddof=1) / np.sqrt(58)
    assert (got["ci95"][1] - got["ci95"][0]) / 2 > naive


def test_one_window_per_episode_gives_the_ordinary_interval():
    x = np.random.default_rng(1).normal(size=12)
    got = clustered_mean(x, np.arange(12))
    half = stats.t.ppf(0.975, 11) * x.std(ddof=1) / np.sqrt(12)
    assert got["ci95"] == pytest.approx([x.mean() - half, x.mean() + half])
    assert clustered_mean(x, np.zeros(12))["ci95"] is None  # one episode: no spread to estimate
    assert clustered_mean(np.full(3, np.nan), np.arange(3))["mean"] is None


def test_auc_is_the_share_of_positive_negative_pairs_ranked_right():
    rng = np.random.default_rng(2)
    scores = rng.integers(0, 5, 40).astype(float)  # many ties
    labels = rng.random(40) < 0.4
    pairs = [
        1.0 if p > q else 0.5 if p == q else 0.0
        for p, q in itertools.product(scores[labels], scores[~labels])
    ]
    assert auc(scores, labels) == pytest.approx(sum(pairs) / len(pairs))
    assert auc(scores, np.ones(40, bool)) is None


def test_correlations_match_their_definitions():
    rng = np.random.default_rng(3)
    x = rng.normal(size=30)
    y = x + rng.normal(size=30)
    got = correlations(x, y)
    xc, yc = x - x.mean(), y - y.mean()
    assert got["pearson"] == pytest.approx((xc * yc).sum() / np.sqrt((xc**2).sum() * (yc**2).sum()))
    rx, ry = np.argsort(np.argsort(x)).astype(float), np.argsort(np.argsort(y)).astype(float)
    assert got["spearman"] == pytest.approx(np.corrcoef(rx, ry)[0, 1])
    assert correlations(x, np.zeros(30))["pearson"] is None


def test_paired_difference_is_against_the_better_baseline_at_each_step():
    rng = np.random.default_rng(4)
    W, S = 40, 4
    episodes = rng.integers(0, 8, W)
    rows = {}
    for name in ("teacher-forced", "open loop", "closed loop"):
        rows[f"mse/{name}"] = rng.random((W, S))
    rows["mse/repeat last frame"] = np.linspace(0, 1, S)[None] + 0.1 * rng.random((W, S))  # grows with k
    rows["mse/past mean frame"] = np.full((W, S), 0.5) + 0.1 * rng.random((W, S))
    rows["mse/other episodes' mean frame"] = np.full((W, S), 0.6) + 0.1 * rng.random((W, S))
    # the oracle (it saw the frames it predicts) is the best at every step, and must never be the bar
    rows["mse/level mean frame (oracle)"] = np.full((W, S), 0.01) + 0.01 * rng.random((W, S))
    rows["mse/closed loop"][5, 2] = np.nan  # a window past its episode's end at one step
    table = frame_table(rows, episodes, "mse")
    assert table["steps"] == [1, 2, 3]
    oracle = table["mean"]["level mean frame (oracle)"]
    assert [c["mean"] for c in oracle] == pytest.approx(rows["mse/level mean frame (oracle)"][:, 1:].mean(0))
    for k in (1, 2, 3):
        fair = ("repeat last frame", "past mean frame", "other episodes' mean frame")
        base = {b: np.nanmean(rows[f"mse/{b}"][:, k]) for b in fair}
        best = min(base, key=base.get)
        cell = table["minus_better_baseline"]["closed loop"][k - 1]
        diff = [rows["mse/closed loop"][w, k] - rows[f"mse/{best}"][w, k] for w in range(W)]
        mean, ci = _clustered_reference(np.array(diff), episodes)
        assert (
            cell["baseline"] == best
            and cell["mean"] == pytest.approx(mean)
            and cell["ci95"] == pytest.approx(ci)
        )
    assert [c["baseline"] for c in table["minus_better_baseline"]["open loop"]] == [
        "repeat last frame",
        "past mean frame",
        "past mean frame",
    ]
    assert table["closed_loop_minus_real_game"] is None and "real game (closed loop)" not in table["mean"]
    rows["mse/real game (closed loop)"] = rng.random(
        (W, S)
    )  # with the real game: the closed loop's gap to it
    table = frame_table(rows, episodes, "mse")
    for k in (1, 2, 3):
        diff = [rows["mse/closed loop"][w, k] - rows["mse/real game (closed loop)"][w, k] for w in range(W)]
        mean, ci = _clustered_reference(np.array(diff), episodes)
        cell = table["closed_loop_minus_real_game"][k - 1]
        assert cell["mean"] == pytest.approx(mean) and cell["ci95"] == pytest.approx(ci)
        assert (
            table["minus_better_baseline"]["real game (closed loop)"][k - 1]["baseline"]
            == (table["minus_better_baseline"]["closed loop"][k - 1]["baseline"])
        )


def test_changed_pixel_error_counts_only_pixels_that_moved_between_true_frames():
    batch = synthetic_batch(WorldModelConfig(num_init_steps=2, num_sim_steps=3), 0, 2)
    batch.frames[1, 0] = batch.frames[0, 0]
    batch.frames[1, 0, :, 5:9, 10:12] = 0  # window 0, step 1: only a small patch changes
    batch.frame_mask[2, 1] = False
    pred = torch.rand(3, 2, 3, 64, 64)
    rows = frame_rows({"m": pred}, batch, threshold=0.05)
    true = batch.frames.double() / 255
    for s, b in itertools.product(range(1, 3), range(2)):
        if not batch.frame_mask[s, b]:
            assert np.isnan(rows["mse/m"][b, s]) and np.isnan(rows["changed/m"][b, s])
            continue
        errs = []
        for y, x in itertools.product(range(64), range(64)):
            if max(abs(true[s, b, c, y, x] - true[s - 1, b, c, y, x]) for c in range(3)) > 0.05:
                errs.append(float(((pred[s, b, :, y, x].double() - true[s, b, :, y, x]) ** 2).mean()))
        assert rows["changed/m"][b, s] == pytest.approx(np.mean(errs))
        assert rows["mse/m"][b, s] == pytest.approx(float((pred[s, b].double() - true[s, b]).pow(2).mean()))
    assert len(errs) > 0


def test_expected_return_weights_each_reward_by_the_chance_of_being_alive():
    S, B = 5, 3
    g = torch.Generator().manual_seed(7)
    reward, done_logit = torch.randn(S, B, generator=g), torch.randn(S, B, generator=g)
    traj = Trajectory(
        *([None] * 7),
        reward=reward,
        done_logit=done_logit,
        **dict.fromkeys(("agent_state", "logits", "value", "action")),
    )
    got = expected_returns(traj)
    p = torch.sigmoid(done_logit.double())  # in double, as the reference sum is (float32 drifts 1e-7)
    for b in range(B):
        total, alive = 0.0, 1.0
        for k in range(1, S):
            total += float(reward[k, b]) * alive
            alive *= 1 - float(p[k, b])
            assert got[b, k - 1] == pytest.approx(total)


def test_nearest_state_of_another_episode_ignores_the_querys_own_episode():
    rng = np.random.default_rng(5)
    ref = rng.normal(size=(50, 4)).astype(np.float32)
    ref_ep = rng.integers(0, 4, 50)
    queries = np.concatenate([ref[:10], rng.normal(size=(5, 4)).astype(np.float32)])
    q_ep = np.concatenate([ref_ep[:10], rng.integers(0, 4, 5)])
    got = nearest_other_episode(ref, ref_ep, queries, q_ep)
    z = (ref - ref.mean(0)) / (ref.std(0) + 1e-6)
    zq = (queries - ref.mean(0)) / (ref.std(0) + 1e-6)
    for i in range(len(queries)):
        d = [np.linalg.norm(zq[i] - z[j]) for j in range(50) if ref_ep[j] != q_ep[i]]
        assert got[i] == pytest.approx(min(d), rel=1e-5)
    assert np.all(got[:10] > 0)  # its own copy in the reference does not count


def test_evaluate_end_to_end(trained_run, store, tmp_path):
    """The command on a seeded pick of windows, each number checked against a computation of its own: the
    baselines and the oracle from the store with numpy, the teacher-forced and open-loop errors window by
    window, the reward labels and the no-dynamics baseline from the recorded rows, controllability as 0
    for a model whose frames ignore the actions (and not 0 for the trained one)."""
    from proclab.worldmodel.evaluation import evaluate_world_model
    from proclab.worldmodel.frame_error import pick_windows
    from proclab.worldmodel.simulate import imagined, teacher_forced

    H, within, picked = 3, 2, 24
    world = TrainedWorldModel.load(
        trained_run, runtime=RuntimeConfig(device="cpu", precision="fp32").runtime()
    )
    settings = EvaluationSettings(horizon=H, within=within, windows=picked, resamples=50)
    result = evaluate_into(tmp_path / "ev", world, store, settings, strip=StripSettings(2))
    assert json.loads((tmp_path / "ev" / "evaluation.json").read_text())["windows"] == result["windows"]
    assert (tmp_path / "ev" / "evaluation.png").stat().st_size > 5000
    assert result["closed_loop"] == "sampled"  # the default
    # the strip is what the quickstart's prediction_strip draws for the same windows (once wm frame-error's)
    rt = make_runtime("cpu", "fp32")
    wm, agent, ckpt = load_world_model(trained_run, rt)
    field = ckpt.meta["reward_field"]
    direct = prediction_strip(
        wm, agent, EpisodeStore(store), field, rt, tmp_path / "s.png", steps=H, windows=2
    )
    assert np.array_equal(
        np.asarray(Image.open(tmp_path / "ev" / "strip.png")), np.asarray(Image.open(direct))
    )
    # the picked windows, one at a time, from the store with plain numpy
    data = EpisodeStore(store)
    n = wm.config.num_init_steps
    config, dataset, picks = pick_windows(wm, data, field, H, picked, 0)
    assert result["windows"] == len(picks) == picked
    levels = data.episodes["level_seed"]
    frames = {e: data.read(e, ["obs"])["obs"].astype(np.float64) / 255 for e in range(data.num_episodes)}
    recorded = {e: data.read(e, [field, "value"]) for e in range(data.num_episodes)}
    level_mean = {
        lv: np.concatenate([frames[e] for e in frames if levels[e] == lv]).mean(0)
        for lv in set(levels.tolist())
    }
    names = ("repeat last frame", "past mean frame", "other episodes' mean frame", "oracle")
    errs = {name: [[] for _ in range(H)] for name in names}
    others = {e: np.concatenate([frames[o] for o in frames if o != e]).mean(0) for e in frames}
    forced, opened = [[] for _ in range(H)], [[] for _ in range(H)]
    eps = [[] for _ in range(H)]
    labels, values, window_eps = [], [], []
    for i in picks:
        e, o = int(dataset.episode_ids[i]), int(dataset.offsets[i])
        obs, last = frames[e], o + n - 1
        item = default_collate([dataset[int(i)]])
        one = make_batch(item, config, wm.codec, field)
        with torch.no_grad():
            tf = teacher_forced(wm, agent, one, modal=True)[1].frame[:, 0].double()
            ol = imagined(wm, agent, one, "true", modal=True).frame[:, 0].double()
        for k in range(1, H + 1):
            if last + k >= len(obs):
                continue
            true = obs[last + k]
            eps[k - 1].append(e)
            errs["repeat last frame"][k - 1].append(((obs[last] - true) ** 2).mean())
            errs["past mean frame"][k - 1].append((((obs[: last + 1].mean(0)) - true) ** 2).mean())
            errs["other episodes' mean frame"][k - 1].append(((others[e] - true) ** 2).mean())
            errs["oracle"][k - 1].append(((level_mean[levels[e]] - true) ** 2).mean())
            forced[k - 1].append(float(((tf[k] - torch.from_numpy(true)) ** 2).mean()))
            opened[k - 1].append(float(((ol[k] - torch.from_numpy(true)) ** 2).mean()))
        rewards = recorded[e][field][last : last + within]  # the rewards of a_0 .. a_{within-1}
        labels.append(bool((rewards > 0).any()))
        values.append(float(recorded[e]["value"][last]))
        window_eps.append(e)
    for k in range(H):
        for name, got in (
            ("repeat last frame", errs["repeat last frame"]),
            ("past mean frame", errs["past mean frame"]),
            ("other episodes' mean frame", errs["other episodes' mean frame"]),
            ("level mean frame (oracle)", errs["oracle"]),
            ("teacher-forced", forced),
            ("open loop", opened),
        ):
            mean, ci = _clustered_reference(np.array(got[k]), np.array(eps[k]))
            cell = result["mse"]["mean"][name][k]
            assert cell["mean"] == pytest.approx(mean, rel=1e-5), (name, k)
            assert cell["ci95"] == pytest.approx(ci, rel=1e-4), (name, k)
    reward = result["reward"]
    assert reward["positives"] == sum(labels) and reward["windows"] == picked
    expected = auc(np.array(values), np.array(labels))
    assert reward["value at start"]["auc"] == (None if expected is None else pytest.approx(expected))
    assert result["real_game"] == "played" and len(result["mse"]["closed_loop_minus_real_game"]) == H
    same = [c["mean"] for c in result["closed_loop_same_actions"]]
    assert len(same) == H and same == sorted(same, reverse=True)
    with pytest.raises(ProclabError, match="exists"):  # wm evaluate never overwrites unasked
        EvaluateArgs(wm=trained_run, data=store, out=tmp_path / "ev").check()
    # controllability: the trained model's frames follow its actions somewhere; with the action's input to
    # the dynamics zeroed they cannot, and the delta-PSNR is exactly 0 at every step
    assert any(abs(c["mean"]) > 1e-6 for c in result["psnr"]["controllability"])
    deaf = TrainedWorldModel.load(trained_run, runtime=rt)
    with torch.no_grad():
        deaf.model.rssm.a_in.weight.zero_()
    settings = EvaluationSettings(windows=8, horizon=H, within=within, real_game=False, resamples=10)
    blind = evaluate_world_model(deaf, data=data, settings=settings)
    assert [c["mean"] for c in blind.psnr["controllability"]] == [0.0] * H
    # benchmarks/wm_hours.py reads the evaluation as written, at the hours of training its checkpoint had
    hours = benchmark("wm_hours")
    line = hours.point(result, hours.hours_at(trained_run / "metrics.csv"))
    rows = list(csv.DictReader((trained_run / "metrics.csv").read_text().splitlines()))
    at = max(int(r["step"]) for r in rows if int(r["step"]) <= result["updates"])
    assert line["hours"] == pytest.approx(
        float(next(r for r in rows if int(r["step"]) == at)["wall_time"]) / 3600, abs=1e-3
    )
    assert line["closed_k1"] == result["mse"]["mean"]["closed loop"][0]["mean"] and "closed_k4" not in line
    fair = ("past mean frame", "other episodes' mean frame")
    assert line["mean_frame_k1"] == min(result["mse"]["mean"][n][0]["mean"] for n in fair)
    diffs = result["mse"]["minus_better_baseline"]["closed loop"]
    assert line["beats_better_baseline_at"] == [k + 1 for k, d in enumerate(diffs) if d["ci95"][1] < 0]


def test_bad_arguments_are_one_line_errors(trained_run, store, tmp_path, capsys):
    from proclab.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["wm", "evaluate", str(trained_run), "--data", str(store), "--horizon", "3", "--within", "5"])
    assert exc.value.code == 2 and "--within" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["wm", "evaluate", str(trained_run), "--data", str(store), "--strip-near", "saw"])
    assert exc.value.code == 2 and "give --strip-windows N too" in capsys.readouterr().err


class _Replaying:
    """An agent whose logits put all mass on the next recorded action of each row (scripted, stateless)."""

    def __init__(self, actions: np.ndarray):
        self.actions, self.t = actions, 0

    def step(self, obs, state, first):
        logits = torch.full((len(obs), 15), -1e9)
        logits[torch.arange(len(obs)), torch.from_numpy(self.actions[:, self.t]).long()] = 0.0
        self.t += 1
        return type("Out", (), {"logits": logits})(), state


def test_the_real_game_replays_recorded_windows_exactly_and_plays_the_agent_as_a_one_slot_loop(
    store, agent_checkpoint
):
    """Each window's state is the episode's first state with its actions replayed (its frame is the
    recorded one); acting out the recorded actions gives back the recorded frames; and the batched
    greedy closed loop is the agent stepped one window at a time in a one-slot env."""
    from proclab.envs import ProcgenVecEnv
    from proclab.models.loading import load_agent
    from proclab.run.runtime import make_runtime
    from proclab.worldmodel.real_game import RealGame

    data = EpisodeStore(store)
    agent, env_config, _ = load_agent(agent_checkpoint, make_runtime("cpu", "fp32"))
    game = RealGame(data, env_config)
    H = 3
    windows = [(e, t) for e in range(data.num_episodes) for t in (1, int(data.episodes["length"][e]) - H - 1)]
    states = [game.state_at(e, t) for e, t in windows]
    rec = [data.read(e, ["obs", "action", "state_out/core.0"]) for e, _ in windows]
    acted = np.stack([r["action"][t : t + H] for r, (_, t) in zip(rec, windows, strict=True)])
    frames, taken = game.play(_Replaying(acted), states, {}, H)
    np.testing.assert_array_equal(taken.T.numpy(), acted)
    for w, (r, (_, t)) in enumerate(zip(rec, windows, strict=True)):
        np.testing.assert_array_equal(frames[:, w].numpy(), r["obs"][t : t + H + 1])
    # greedy, batched, against one window at a time in a one-slot env of the agent's game
    start = {"core.0.h": torch.from_numpy(np.stack([r["state_out/core.0"][t - 1] for r, (_, t) in zip(rec, windows, strict=True)])).float()}  # fmt: skip
    batched, _ = game.play(agent, states, dict(start), H)
    one = ProcgenVecEnv(env_config, seed=0, num_envs=1)
    one.reset()
    for w, s in enumerate(states):
        one.set_slot_state(0, s)
        obs, state, ended = one.observe(), {"core.0.h": start["core.0.h"][w : w + 1]}, False
        expected = [obs[0]]
        for _ in range(H):
            with torch.no_grad():
                out, state = agent.step(torch.from_numpy(obs), state, torch.zeros(1, dtype=torch.bool))
            nxt, _, term, trunc, _ = one.step(out.logits.argmax(1).numpy())
            ended = ended or bool(term[0] or trunc[0])
            obs = obs if ended else nxt
            expected.append(obs[0])
        np.testing.assert_array_equal(batched[:, w].numpy(), np.stack(expected))
    one.close()


def test_same_actions_so_far_is_one_until_the_first_difference_and_nan_past_the_end():
    from proclab.worldmodel.evaluation import same_so_far

    rng = np.random.default_rng(6)
    B, H = 30, 6
    real = rng.integers(0, 3, (B, H))
    dreamt = np.where(rng.random((B, H)) < 0.8, real, (real + 1) % 3)
    mask = rng.random((B, H + 1)) < 0.9
    got = same_so_far(dreamt, real, mask)
    for b in range(B):
        for k in range(H):
            expected = float(all(dreamt[b, j] == real[b, j] for j in range(k + 1)))
            assert (np.isnan(got[b, k]) and not mask[b, k + 1]) or (mask[b, k + 1] and got[b, k] == expected)


def _planted_future_store(path, episodes: int = 10, length: int = 80, seen: int = 4):
    """One episode per level: its first ``seen`` frames dark grey, every later frame one colour of its own
    (each channel 150 or 255). Only a mean that has seen the episode's future knows that colour."""
    from proclab.store import ShardWriter

    rng = np.random.default_rng(8)
    with ShardWriter(path, commit_seconds=0) as w:
        for e in range(episodes):
            obs = np.full((length, 3, 64, 64), 40, np.uint8)
            obs[seen:] = rng.choice(np.array([150, 255], np.uint8), 3)[:, None, None]
            w.append(
                {
                    "obs": obs,
                    "action": np.zeros(length, np.int64),
                    "reward": np.zeros(length, np.float32),
                    "terminated": np.zeros(length, bool),
                },
                {"level_seed": np.int64(100 + e)},
            )
    return path


def test_the_oracle_mean_frame_wins_only_by_seeing_the_future_and_is_never_the_bar(tmp_path):
    """Planted: after the frames the model saw, each level turns a colour of its own. The level mean of the
    whole store (the old baseline) has seen it and beats every fair predictor; the past mean frame (the mean
    of the frames up to the last one seen) and the other episodes' mean frame have not, and each equals a
    frame-by-frame reference. A model that predicts the colour with some error beats the fair baselines, and
    is judged so; against the oracle it would lose."""
    from proclab.worldmodel.frame_error import fair_mean_frames, frame_total, level_mean_frames

    seen, H = 4, 5
    store = EpisodeStore(_planted_future_store(tmp_path / "planted.zarr", seen=seen))
    episodes = np.arange(store.num_episodes)
    last = np.full(len(episodes), seen - 1)  # windows whose last seen frame is row seen - 1
    fair = fair_mean_frames(store, episodes, last, frame_total(store))
    oracle = level_mean_frames(store)
    everything = {e: store.read(int(e), ["obs"])["obs"].astype(np.float64) / 255 for e in episodes}
    noise = np.random.default_rng(11)
    rows = {}
    for e in episodes:
        obs = everything[e]
        past = sum(obs[t] for t in range(seen)) / seen  # only what the model saw
        others = np.concatenate([everything[o] for o in episodes if o != e]).mean(0)
        np.testing.assert_allclose(fair["past mean frame"][e], past, rtol=1e-6)
        np.testing.assert_allclose(fair["other episodes' mean frame"][e], others, rtol=1e-6)
        future = obs[seen - 1 : seen + H]  # step 0 .. H
        level = int(store.episodes["level_seed"][e])
        model = future + noise.uniform(-0.12, 0.12, future.shape)
        for name, guess in (
            ("repeat last frame", obs[seen - 1]),
            ("past mean frame", past),
            ("other episodes' mean frame", others),
            ("level mean frame (oracle)", oracle[level]),
            *((mode, model) for mode in ("teacher-forced", "open loop", "closed loop")),
        ):
            rows.setdefault(f"mse/{name}", []).append(((future - guess) ** 2).mean((1, 2, 3)))
    rows = {k: np.array(v) for k, v in rows.items()}
    table = frame_table(rows, episodes, "mse")
    means = {name: [c["mean"] for c in cells] for name, cells in table["mean"].items()}
    for k in range(H):
        fair_best = min(
            means[name][k] for name in ("repeat last frame", "past mean frame", "other episodes' mean frame")
        )
        assert means["level mean frame (oracle)"][k] < means["closed loop"][k] < fair_best
        cell = table["minus_better_baseline"]["closed loop"][k]
        assert cell["baseline"] != "level mean frame (oracle)" and cell["ci95"][1] < 0


def test_psnr_is_ten_log_of_one_over_each_windows_mse():
    batch = synthetic_batch(WorldModelConfig(num_init_steps=2, num_sim_steps=3), 0, 2)
    batch.frame_mask[2, 1] = False
    pred = torch.rand(3, 2, 3, 64, 64)
    pred[1, 0] = batch.frames[1, 0].float() / 255  # an exact frame: capped, not infinite
    rows = frame_rows({"m": pred}, batch, threshold=0.05)
    true = batch.frames.double() / 255
    for s, b in itertools.product(range(3), range(2)):
        if not batch.frame_mask[s, b]:
            assert np.isnan(rows["psnr/m"][b, s])
            continue
        mse = float(((pred[s, b].double() - true[s, b]) ** 2).sum()) / (3 * 64 * 64)
        expected = 10 * np.log10(1 / max(mse, 1e-10))
        assert rows["psnr/m"][b, s] == pytest.approx(expected, rel=1e-5)
    assert rows["psnr/m"][0, 1] == pytest.approx(100)


def test_clustered_auc_interval_resamples_whole_episodes():
    """Against a written-out episode bootstrap (same draws), and planted: copying every episode's windows
    five times leaves the clustered interval as wide, where resampling windows would narrow it."""
    rng = np.random.default_rng(9)
    G = 30
    per = rng.integers(1, 5, G)
    episodes = np.repeat(np.arange(G), per)
    label = np.repeat(rng.random(G) < 0.4, per)  # an episode's windows share its outcome
    scores = label * 0.6 + rng.random(len(label))
    got = clustered_auc(scores, label, episodes, resamples=200, seed=4)
    draws = np.random.default_rng(4)
    values = []
    for _ in range(200):
        picked = draws.integers(0, G, G)
        rows = [i for g in picked for i in range(len(episodes)) if episodes[i] == g]
        s, lab = scores[rows], label[rows]
        if lab.all() or not lab.any():
            continue
        pairs = [1.0 if p > q else 0.5 if p == q else 0.0 for p in s[lab] for q in s[~lab]]
        values.append(sum(pairs) / len(pairs))
    assert got["auc"] == pytest.approx(auc(scores, label))
    assert got["ci95"] == pytest.approx([np.percentile(values, 2.5), np.percentile(values, 97.5)])
    assert got["clusters"] == G and got["positives"] == int(label.sum())
    copies = clustered_auc(np.tile(scores, 5), np.tile(label, 5), np.tile(episodes, 5), 200, 4)
    width, copied = got["ci95"][1] - got["ci95"][0], copies["ci95"][1] - copies["ci95"][0]
    assert copied == pytest.approx(width, rel=0.35)
    rows = np.random.default_rng(5).integers(0, 5 * len(scores), (200, 5 * len(scores)))
    by_window = [auc(np.tile(scores, 5)[r], np.tile(label, 5)[r]) for r in rows]  # the wrong resampling
    assert np.diff(np.percentile(by_window, [2.5, 97.5]))[0] < 0.7 * copied
    assert clustered_auc(scores, np.zeros(len(scores), bool), episodes)["ci95"] is None


def test_reward_table_baseline_magnitude_and_windows_without_an_end():
    from proclab.worldmodel.evaluation import reward_table

    rng = np.random.default_rng(10)
    W, S = 60, 4
    episodes = rng.integers(0, 15, W)
    real = np.cumsum(np.where(rng.random((W, S)) < 0.1, 10.0, 0.0), 1)
    rows = {"episode": episodes, "return/real": real}
    for name in ("teacher-forced", "open loop", "closed loop"):
        rows[f"return/{name}"] = np.cumsum(rng.normal(size=(W, S)), 1) + real * 0.05
    rows["reward/value at start"] = rng.normal(size=W) + (real[:, 2] > 0)
    rows["reward/no end within"] = rng.random(W) < 0.6
    table = reward_table(rows, within=3, resamples=50)
    label = real[:, 2] > 0
    assert table["positives"] == int(label.sum())
    assert table["value at start"]["auc"] == pytest.approx(auc(rows["reward/value at start"], label))
    keep = rows["reward/no end within"]
    got = table["teacher-forced, no end within"]
    assert got["auc"] == pytest.approx(auc(rows["return/teacher-forced"][keep, 2], label[keep]))
    assert got["positives"] == int(label[keep].sum())
    closed = table["closed loop"]
    mean, ci = _clustered_reference(np.where(label, rows["return/closed loop"][:, 2], np.nan), episodes)
    assert closed["mean_in_positives"]["mean"] == pytest.approx(mean)
    assert closed["mean_in_positives"]["ci95"] == pytest.approx(ci)
    assert table["real_reward_in_positives"]["mean"] == pytest.approx(real[label, 2].mean())
    assert closed["auc"] == pytest.approx(auc(rows["return/closed loop"][:, 2], label))
