"""Probe statistics against slow, obvious references: out-of-fold predictions per held-out episode with
the penalty chosen on held-out episodes, pooled R^2 / accuracy and their weighted bootstrap, the
headline margin over the strongest control, the label controls, the time baseline, centres of mass,
and the channel correlations; and planted cases where the old choices fail."""

import json

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge, RidgeCV
from sklearn.model_selection import GroupKFold

from proclab.errors import ProclabError
from proclab.interpret.probes.linear import (
    ALPHAS,
    CS,
    EpisodeSums,
    control_task,
    cross_validated,
    probe_kind,
    scored,
    select_penalty,
    shuffled_labels,
    time_features,
)
from proclab.interpret.probes.probe import ProbeSettings, probe_target
from proclab.interpret.probes.spatial import Moments, best_channel_margin, centres_of_mass, track_channels
from proclab.stats.bootstrap import resamples


def episodes(n_ep=12, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, 15, n_ep)
    return np.repeat(np.arange(n_ep) * 3 + 1, lengths), rng  # ids need not be 0..E-1


def test_ridge_probe_recovers_a_linear_target_and_auto_picks_the_kind():
    episode, rng = episodes()
    x = rng.normal(size=(len(episode), 6))
    y = x @ rng.normal(size=6) + 0.1 * rng.normal(size=len(episode))
    pred = cross_validated(x, y, episode, "ridge", folds=4)
    r2 = 1 - ((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    assert r2 > 0.9
    assert probe_kind(y, "auto") == "ridge" and probe_kind((y > 0).astype(float), "auto") == "logistic"


def standardised(train, *others):
    """The training rows' standardisation; held-out rows are clipped to the training columns' ranges first."""
    mu, sd = train.mean(0), train.std(0)
    return [(train - mu) / sd, *((np.clip(a, train.min(0), train.max(0)) - mu) / sd for a in others)]


def loss(kind, model, x, y):
    if kind == "ridge":
        return ((model.predict(x) - y) ** 2).sum()
    p = np.clip(model.predict_proba(x)[:, 1], 1e-12, 1 - 1e-12)
    return -(y * np.log(p) + (1 - y) * np.log(1 - p)).sum()


def model_of(kind, penalty):
    return Ridge(alpha=penalty) if kind == "ridge" else LogisticRegression(C=penalty, max_iter=2000)


@pytest.mark.parametrize("kind", ["ridge", "logistic"])
def test_one_fold_per_episode_matches_nested_leave_one_episode_out_by_hand(kind):
    """With as many folds as episodes, the outer and the inner splits are both leave-one-episode-out: the
    reference loops over held-out episodes, penalties and inner held-out episodes with plain scikit-learn
    fits, picks the penalty of least pooled held-out loss, and refits."""
    episode, rng = episodes(5, 1)
    x = rng.normal(size=(len(episode), 3))
    signal = x[:, 0] + 0.8 * rng.normal(size=len(episode))
    y = (signal > 0).astype(float) if kind == "logistic" else signal
    grid = ALPHAS if kind == "ridge" else CS
    pred = cross_validated(x, y, episode, kind, folds=5)
    ids = np.unique(episode)
    for e in ids:
        held = episode == e
        losses = np.zeros(len(grid))
        for k, penalty in enumerate(grid):
            for e2 in ids[ids != e]:
                inner_train, inner_test = ~held & (episode != e2), episode == e2
                a, b = standardised(x[inner_train], x[inner_test])
                losses[k] += loss(kind, model_of(kind, penalty).fit(a, y[inner_train]), b, y[inner_test])
        best = grid[np.argmin(losses)]
        a, b = standardised(x[~held], x[held])
        want = model_of(kind, best).fit(a, y[~held]).predict(b)
        if kind == "ridge":
            np.testing.assert_allclose(pred[held], want, rtol=1e-6, atol=1e-9)
        else:
            np.testing.assert_array_equal(pred[held], want)


def test_leave_one_step_out_overfits_autocorrelated_episodes_and_grouped_choice_does_not():
    """Planted: each episode's steps are near-copies of one input, the target is one input column plus
    an episode-level offset the inputs do not predict. Leave-one-out over steps (the old ``RidgeCV``) sees
    each held-out step's near-copies in the fit, picks the weakest penalty, and fits the offsets: on held-out
    episodes its R^2 collapses. The penalty chosen on held-out episodes does not."""
    rng = np.random.default_rng(1)
    n_ep, length, width = 40, 20, 30
    episode = np.repeat(np.arange(n_ep), length)
    x = rng.normal(size=(n_ep, width))[episode] + 0.02 * rng.normal(size=(n_ep * length, width))
    y = x[:, 0] + rng.normal(size=n_ep)[episode] + 0.1 * rng.normal(size=len(episode))

    def r2(pred):
        return 1 - ((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum()

    old, alphas = np.empty(len(y)), []
    for train, test in GroupKFold(5).split(x, y, episode):
        a, b = standardised(x[train], x[test])
        m = RidgeCV(alphas=ALPHAS).fit(a, y[train])
        old[test], alphas = m.predict(b), [*alphas, m.alpha_]
    new = r2(cross_validated(x, y, episode, "ridge", folds=5))
    assert min(alphas) == ALPHAS.min()  # leave-one-step-out chose the weakest penalty
    assert r2(old) < -1.0 and new > r2(old) + 1.0 and new > -0.3


def test_a_unit_that_fires_in_one_held_out_episode_is_not_extrapolated():
    """Planted: the target is one input column plus noise; a "rare unit" fires on every step of episode 0
    and on two steps of episode 1 (where the target is 0.5 off its column), zero elsewhere. Standardised by its
    training deviation (two active steps), its value in held-out episode 0 lies about 170 deviations out;
    fitted without the clip, a ridge at the penalty the inner folds choose predicts that episode far off.
    Clipped to the training range, the probe predicts it as well as any other episode."""
    rng = np.random.default_rng(3)
    n_ep, length = 30, 20
    episode = np.repeat(np.arange(n_ep), length)
    x = rng.normal(size=(n_ep * length, 8))
    y = x[:, 0] + 0.3 * rng.normal(size=len(episode))
    rare = np.zeros(len(episode))
    rare[episode == 0] = 3.0
    rare[np.flatnonzero(episode == 1)[:2]] = 0.3
    y[np.flatnonzero(episode == 1)[:2]] += 0.5
    x = np.column_stack([x, rare])
    pred = cross_validated(x, y, episode, "ridge", folds=5)
    held = episode == 0
    clipped_error = ((pred[held] - y[held]) ** 2).mean()
    assert clipped_error < 1.0, clipped_error
    r2 = 1 - ((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    assert r2 > 0.8
    train = ~held
    alpha = select_penalty(x[train], y[train], episode[train], "ridge", 5)
    mu, sd = x[train].mean(0), x[train].std(0)
    unclipped = Ridge(alpha=alpha).fit((x[train] - mu) / sd, y[train]).predict((x[held] - mu) / sd)
    assert ((unclipped - y[held]) ** 2).mean() > 20 * clipped_error, ((unclipped - y[held]) ** 2).mean()


def test_fewer_than_two_folds_or_three_episodes_is_one_line():
    episode, rng = episodes(6, 2)
    x, y = rng.normal(size=(len(episode), 2)), rng.normal(size=len(episode))
    with pytest.raises(ProclabError, match="--folds must be >= 2"):
        cross_validated(x, y, episode, "ridge", folds=1)
    two = episode <= episode[np.flatnonzero(np.diff(episode))[0] + 1]
    with pytest.raises(ProclabError, match="at least 3 episodes"):
        cross_validated(x[two], y[two], episode[two], "ridge", folds=2)
    with pytest.raises(ProclabError, match="--folds must be >= 2"):
        ProbeSettings(folds=1).check()


@pytest.mark.parametrize("kind", ["ridge", "logistic"])
def test_weighted_scores_equal_scores_on_repeated_episodes(kind):
    episode, rng = episodes(7, 2)
    y = rng.normal(size=len(episode))
    pred = y + rng.normal(size=len(episode))
    if kind == "logistic":
        y, pred = (y > 0).astype(float), (pred > 0).astype(float)
    sums = EpisodeSums.of(y, pred, episode, kind)
    ids = np.unique(episode)
    w = rng.integers(0, 3, len(ids)).astype(float)
    w[0] = 1
    rows = np.concatenate(
        [np.flatnonzero(episode == e) for e, k in zip(ids, w, strict=True) for _ in range(int(k))]
    )
    yy, pp = y[rows], pred[rows]
    want = (
        (yy == pp).mean()
        if kind == "logistic"
        else 1 - ((yy - pp) ** 2).sum() / ((yy - yy.mean()) ** 2).sum()
    )
    np.testing.assert_allclose(sums.score(w), want, rtol=1e-10)


def test_shuffled_labels_move_whole_episodes():
    episode, _ = episodes(9, 3)
    y = episode * 100.0 + np.concatenate([np.arange((episode == e).sum()) for e in np.unique(episode)])
    s = shuffled_labels(y, episode, seed=4)
    for e in np.unique(episode):
        got = s[episode == e]
        assert len(np.unique(got // 100)) == 1  # one source episode
        assert np.all(np.diff(got) >= 0)  # its course kept in order
    assert sorted(np.unique(s // 100)) == sorted(np.unique(episode))  # a permutation of episodes


def test_control_task_is_one_draw_of_the_target_per_level_in_every_episode():
    episode, rng = episodes(12, 3)
    level = (episode // 7) % 4  # 4 levels, most played by several episodes
    y = rng.normal(size=len(episode))
    c = control_task(y, level, seed=2)
    for lv in np.unique(level):
        assert len(np.unique(c[level == lv])) == 1  # one label for the level, across its episodes
        assert np.isin(c[level == lv][0], y)  # drawn from the target's own values
    assert len(np.unique(c)) > 1
    np.testing.assert_array_equal(c, control_task(y, level, seed=2))  # fixed, so the same in every fold
    assert not np.array_equal(c, control_task(y, level, seed=3))


def test_time_features_by_hand():
    episode = np.array([5, 5, 5, 9, 2, 2])
    np.testing.assert_allclose(time_features(episode), [[0, 0], [1, 1], [2, 4], [0, 0], [0, 0], [1, 1]])


def test_the_time_features_of_a_step_do_not_depend_on_how_long_its_episode_runs():
    short, long = np.repeat([0, 1], [4, 9]), np.repeat([0, 1], [4, 30])  # the second episode runs on
    np.testing.assert_array_equal(time_features(short), time_features(long)[: len(short)])


def test_headline_is_the_margin_over_the_strongest_control_in_each_resample():
    """Reference: for each resample, every score recomputed from the repeated rows, the highest control
    taken in that resample, and the percentile interval at the Bonferroni level."""
    episode, rng = episodes(8, 4)
    y = rng.normal(size=len(episode))
    preds = {"probe": y + 0.5 * rng.normal(size=len(y))}
    preds |= {name: y + s * rng.normal(size=len(y)) for name, s in (("a", 0.6), ("b", 0.7), ("c", 2.0))}
    sums = {name: EpisodeSums.of(y, p, episode, "ridge") for name, p in preds.items()}
    got = scored(sums, reps=200, seed=3, family=3)
    ids = np.unique(episode)
    diffs = []
    for draw in resamples(len(ids), 200, 3):
        rows = np.concatenate([np.flatnonzero(episode == ids[i]) for i in draw])
        r2 = {
            n: 1 - ((y[rows] - p[rows]) ** 2).sum() / ((y[rows] - y[rows].mean()) ** 2).sum()
            for n, p in preds.items()
        }
        diffs.append(r2["probe"] - max(r2["a"], r2["b"], r2["c"]))
    h = got["headline"]
    assert h["strongest_control"] == max("abc", key=lambda n: got[n]["score"])
    assert h["margin"] == pytest.approx(got["probe"]["score"] - got[h["strongest_control"]]["score"])
    tail = 50 * 0.05 / 3
    np.testing.assert_allclose(h["ci"], np.percentile(diffs, [tail, 100 - tail]), rtol=1e-9)
    assert h["significant"] == (h["ci"][0] > 0)


def planted_time_episodes(beyond: bool):
    """Episodes of 30-60 steps; the target is the step index (plus, with ``beyond``, an offset per
    episode); the inputs carry the step index, the offset, and noise columns."""
    rng = np.random.default_rng(5)
    lengths = rng.integers(30, 60, 30)
    episode = np.repeat(np.arange(30), lengths)
    step = time_features(episode)[:, 0]
    offset = rng.normal(0, 10, 30)[episode]
    y = step + (offset if beyond else 0) + rng.normal(size=len(step))
    x = np.c_[step, offset, rng.normal(size=(len(step), 4))] + 0.5 * rng.normal(size=(len(step), 6))
    return y, x, rng.normal(size=x.shape), episode, episode  # each episode its own level


def test_a_target_that_is_only_time_has_no_margin_over_the_time_baseline():
    y, x, noise, episode, level = planted_time_episodes(beyond=False)
    r = probe_target(y, x, noise, episode, level, ProbeSettings(folds=3, bootstrap=300))
    assert r["probe"]["score"] > 0.8  # the old headline (probe beside its controls) looks strong
    assert r["shuffled_labels"]["probe_margin"]["significant"]  # and beats shuffled labels
    h = r["headline"]
    assert h["strongest_control"] == "time_baseline"
    assert abs(h["margin"]) < 0.02 and not h["significant"]


def test_a_target_encoded_beyond_time_has_a_positive_margin():
    y, x, noise, episode, level = planted_time_episodes(beyond=True)
    r = probe_target(y, x, noise, episode, level, ProbeSettings(folds=3, bootstrap=300))
    h = r["headline"]
    assert h["strongest_control"] == "time_baseline" and h["significant"] and h["margin"] > 0.2


def test_centres_of_mass_by_hand():
    rng = np.random.default_rng(5)
    maps = rng.normal(size=(3, 2, 4, 8))
    maps[1, 1] = -1  # silent
    got = centres_of_mass(maps)
    for n in range(3):
        for c in range(2):
            m = np.maximum(maps[n, c], 0)
            if m.sum() == 0:
                assert np.isnan(got[n, c]).all()
                continue
            px = sum(m[i, j] * (j + 0.5) * 8 for i in range(4) for j in range(8)) / m.sum()
            py = sum(m[i, j] * (i + 0.5) * 16 for i in range(4) for j in range(8)) / m.sum()
            np.testing.assert_allclose(got[n, c], [px, py])


def test_moments_give_pearson_on_complete_steps():
    episode, rng = episodes(5, 6)
    a = rng.normal(size=(len(episode), 3))
    a[::7, 1] = np.nan
    b = a[:, 0] * 2 + rng.normal(size=len(episode))
    _, inv = np.unique(episode, return_inverse=True)
    r = Moments.of(a, b, inv, 5).correlation(np.ones(5))
    for c in range(3):
        ok = ~np.isnan(a[:, c])
        np.testing.assert_allclose(r[c], np.corrcoef(a[ok, c], b[ok])[0, 1])


def test_a_tracking_channel_is_found_and_noise_is_not():
    episode, rng = episodes(30, 7)
    pos = np.repeat(rng.uniform(0, 64, (30, 2)), np.bincount(np.unique(episode, return_inverse=True)[1]), 0)
    centres = rng.uniform(0, 64, (len(episode), 5, 2))
    centres[:, 3] = pos + rng.normal(0, 4, pos.shape)
    rows = track_channels(centres, pos, episode, permutations=100, bootstrap=200)
    assert rows[0]["channel"] == 3 and rows[0]["significant"] and rows[0]["ci"][0] > 0.5
    assert not any(r["significant"] for r in rows[1:])


def test_a_channel_whose_centre_never_moves_has_no_score_and_enough_permutations_are_taken():
    episode, rng = episodes(30, 8)
    pos = rng.uniform(0, 64, (len(episode), 2))
    centres = rng.uniform(0, 64, (len(episode), 3, 2))
    centres[:, 1] = 20.0  # a channel lit on one cell only
    centres[:, 2] = pos
    rows = track_channels(centres, pos, episode, bootstrap=100)  # permutations: automatic, 2 * 3 / 0.05
    by_channel = {r["channel"]: r for r in rows}
    assert by_channel[1]["score"] is None and not by_channel[1]["significant"]
    assert rows[-1]["channel"] == 1
    assert by_channel[2]["significant"] and by_channel[2]["p"] == pytest.approx(1 / 121)


def test_per_episode_sums_of_a_probe_give_back_its_scores():
    """The per-episode sums a probe result keeps recompute every score it reports (so targets can be
    compared paired by episode afterwards), and survive JSON."""
    y, x, noise, episode, level = planted_time_episodes(beyond=True)
    r = probe_target(y, x, noise, episode, level, ProbeSettings(folds=3, bootstrap=50))
    per = r["per_episode"]
    assert per["episodes"] == sorted(set(episode.tolist()))
    for name in ("probe", "random_agent", "control_task", "shuffled_labels", "time_baseline", "constant"):
        sums = EpisodeSums.from_dict(json.loads(json.dumps(per[name])))
        assert sums.score(np.ones(len(per["episodes"]))) == pytest.approx(r[name]["score"], abs=1e-12)


def slow_best_score(centres, pos, rows):
    """The highest channel score (mean of the x and y Pearson correlations) on ``rows``, by np.corrcoef."""
    best = -np.inf
    for c in range(centres.shape[1]):
        r = [np.corrcoef(centres[rows, c, k], pos[rows, k])[0, 1] for k in (0, 1)]
        best = max(best, np.nan_to_num(np.mean(r)))
    return best


def test_best_channel_margin_against_a_slow_reference_and_planted_networks():
    """Reference: per resample, the rows of the drawn episodes, every channel's correlations by np.corrcoef,
    the best of each network, their difference, the percentile interval. Planted: a network with one
    tracking channel beats 8 noise channels (the best of which is above 0 by chance), the same network
    against itself does not."""
    episode, rng = episodes(16, 9)
    ids, inv = np.unique(episode, return_inverse=True)
    pos = rng.uniform(0, 64, (len(episode), 2))
    tracker = rng.uniform(0, 64, (len(episode), 3, 2))
    tracker[:, 1] = pos + rng.normal(0, 20, pos.shape)
    noise = rng.uniform(0, 64, (len(episode), 8, 2))
    got = best_channel_margin(tracker, noise, pos, episode, bootstrap=100, seed=2)
    all_rows = np.arange(len(episode))
    assert got["best"]["channel"] == 1
    assert got["best"]["score"] == pytest.approx(slow_best_score(tracker, pos, all_rows))
    assert got["reference_best"]["score"] == pytest.approx(slow_best_score(noise, pos, all_rows))
    diffs = []
    for draw in resamples(len(ids), 100, 2):
        rows = np.concatenate([np.flatnonzero(inv == i) for i in draw])
        diffs.append(slow_best_score(tracker, pos, rows) - slow_best_score(noise, pos, rows))
    np.testing.assert_allclose(got["ci"], np.percentile(diffs, [2.5, 97.5]), rtol=1e-9, atol=1e-12)
    assert got["above"] and got["reference_best"]["score"] > 0
    itself = best_channel_margin(tracker, tracker, pos, episode, bootstrap=100)
    assert itself["margin"] == 0 and not itself["above"]


def planted_place_episodes(knows_place: bool):
    """Episodes whose agent walks about a level with a fixed place (one per level, drawn far apart); the
    target is the offset from the agent to the place. The inputs carry the agent's position, and with
    ``knows_place`` the place too, plus noise columns."""
    rng = np.random.default_rng(8)
    lengths = rng.integers(30, 60, 40)
    episode = np.repeat(np.arange(40), lengths)
    agent = np.cumsum(rng.normal(size=(len(episode), 2)), 0)
    place = rng.normal(0, 20, (40, 2))[episode]
    y = place[:, 0] - agent[:, 0]
    cols = [agent, place] if knows_place else [agent, rng.normal(size=agent.shape)]
    x = np.c_[(*cols, rng.normal(size=(len(y), 3)))] + 0.1 * rng.normal(size=(len(y), 7))
    return y, x, rng.normal(size=x.shape), episode, agent


def test_the_agent_position_control_is_the_position_alone_by_hand():
    y, x, noise, episode, agent = planted_place_episodes(knows_place=False)
    settings = ProbeSettings(folds=3, bootstrap=50, controls=("agent_position",))
    r = probe_target(y, x, noise, episode, episode, settings, position=agent)
    reference = cross_validated(agent, y, episode, "ridge", 3)  # the same probe, fitted on (x, y) alone
    ss = ((y - reference) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    assert r["agent_position"]["score"] == pytest.approx(1 - ss, rel=1e-9)
    with pytest.raises(ProclabError, match="agent's position"):
        probe_target(y, x, noise, episode, episode, settings)


def test_an_offset_read_from_the_position_alone_has_no_margin_over_it_and_one_from_the_place_has():
    """The offset to a place that never moves within a level: a state holding only the agent's position reads
    much of it (the time baseline and the other controls miss it), and only the position control says so."""
    settings = ProbeSettings(folds=3, bootstrap=300, controls=("time_baseline", "agent_position"))
    y, x, noise, episode, agent = planted_place_episodes(knows_place=False)
    r = probe_target(y, x, noise, episode, episode, settings, position=agent)
    assert r["probe"]["score"] > 0.3 and r["time_baseline"]["probe_margin"]["significant"]
    h = r["headline"]
    assert h["strongest_control"] == "agent_position" and not h["significant"]
    y, x, noise, episode, agent = planted_place_episodes(knows_place=True)
    h = probe_target(y, x, noise, episode, episode, settings, position=agent)["headline"]
    assert h["strongest_control"] == "agent_position" and h["significant"] and h["margin"] > 0.3
