"""Probe statistics against slow, obvious references: out-of-fold predictions per held-out episode,
pooled R^2 / accuracy and their weighted bootstrap, the label control, centres of mass, and the
channel correlations."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, RidgeCV

from proclab.interpret.probes.linear import (
    ALPHAS,
    EpisodeSums,
    cross_validated,
    probe_kind,
    shuffled_labels,
)
from proclab.interpret.probes.spatial import Moments, centres_of_mass, track_channels


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


def test_one_fold_per_episode_matches_leave_one_episode_out_by_hand():
    episode, rng = episodes(6, 1)
    x = rng.normal(size=(len(episode), 3))
    y = (x[:, 0] + 0.5 * rng.normal(size=len(episode)) > 0).astype(float)
    pred = cross_validated(x, y, episode, "logistic", folds=6)
    for e in np.unique(episode):
        held = episode == e
        mu, sd = x[~held].mean(0), x[~held].std(0)
        m = LogisticRegression(max_iter=2000).fit((x[~held] - mu) / sd, y[~held])
        np.testing.assert_array_equal(pred[held], m.predict((x[held] - mu) / sd))
    r = cross_validated(x, x[:, 1], episode, "ridge", folds=6)
    for e in np.unique(episode):
        held = episode == e
        mu, sd = x[~held].mean(0), x[~held].std(0)
        m = RidgeCV(alphas=ALPHAS).fit((x[~held] - mu) / sd, x[~held, 1])
        np.testing.assert_allclose(r[held], m.predict((x[held] - mu) / sd), rtol=1e-6, atol=1e-9)


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
