"""Demo selection and clip-pair construction: the invariants T-REX relies on."""

import numpy as np
import pytest
import torch

from proclab.errors import ProclabError
from proclab.reward.metrics import pair_accuracy
from proclab.reward.pairs import NUM_BINS, clip_frames, make_pairs, stratified_pick, train_val_split


def demos(n=30, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(21, 300, n), rng.integers(0, 8, n).astype(float)  # lengths, returns (with ties)


@pytest.mark.parametrize("progress", [True, False])
def test_pairs_invariants(progress):
    lengths, returns = demos()
    p = make_pairs(
        lengths, returns, 5000, np.random.default_rng(1), min_len=20, max_len=100, progress=progress
    )
    assert len(p) == 5000 and p.demo.shape == p.start.shape == (5000, 2)
    worse, better = p.demo[:, 0], p.demo[:, 1]
    assert (returns[better] > returns[worse]).all()  # the label (column 1) is the higher-return demo; no ties
    assert ((p.length >= 20) & (p.length < 100)).all()  # one length for both clips, in [min, max)
    assert (p.length < np.minimum(lengths[worse], lengths[better])).all()
    assert (p.start >= 0).all() and (p.start + p.length[:, None] <= lengths[p.demo]).all()  # inside the demo
    if progress:
        assert (p.start[:, 1] >= p.start[:, 0]).all()  # better clip never starts earlier
        assert (p.start[:, 0] + p.length <= np.minimum(lengths[worse], lengths[better])).all()
    else:
        assert (p.start[:, 1] < p.start[:, 0]).any()  # without the heuristic both orders occur
    assert len(np.unique(p.demo)) == len(lengths)  # every demo gets used


def test_pairs_draw_every_allowed_length_and_start():
    lengths, returns = np.array([40, 60]), np.array([1.0, 2.0])
    p = make_pairs(lengths, returns, 4000, np.random.default_rng(0), min_len=20, max_len=100)
    assert set(p.length) == set(range(20, 40))  # high end exclusive, as the seed's randint
    assert p.start[:, 0].min() == 0 and (p.start[:, 0] + p.length).max() == 40


def test_pairs_refuse_unrankable_demos():
    with pytest.raises(ProclabError, match="single return 3"):
        make_pairs(np.array([50, 60, 70]), np.array([3.0, 3.0, 3.0]), 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="longer than min_len"):
        make_pairs(np.array([20, 60]), np.array([1.0, 2.0]), 10, np.random.default_rng(0), min_len=20)


def test_clip_frames_with_stride():
    first = torch.tensor([[10, 50], [0, 7]])
    index, mask = clip_frames(first, torch.tensor([5, 2]), stride=2)
    assert index.shape == (2, 2, 3) and mask.shape == (2, 1, 3)
    assert index[0, 0].tolist() == [10, 12, 14] and index[0, 1].tolist() == [50, 52, 54]
    assert index[1, 1, mask[1, 0]].tolist() == [7] and mask[1, 0].tolist() == [True, False, False]


def test_stratified_pick_spreads_over_bins_and_terminates():
    returns = np.array([0, 0, 0, 0, 0, 0, 1, 2, 5, 9, 10.0])  # top edge (10) belongs to the top bin
    rng = np.random.default_rng(0)
    picked = stratified_pick(returns, 4, rng)
    bins = np.minimum((returns[picked] / 10 * NUM_BINS).astype(int), NUM_BINS - 1)
    assert bins.tolist() == [0, 2, 3, 0]  # one per bin in turn; bin 1 ([2.5, 5)) is empty and skipped
    everything = stratified_pick(returns, len(returns), rng)  # bins run dry: skipped, no hang
    assert sorted(everything) == list(range(len(returns)))
    with pytest.raises(ProclabError, match="asked for 12 demos but only 11"):
        stratified_pick(returns, 12, rng)
    with pytest.raises(ProclabError, match="same return"):
        stratified_pick(np.ones(5), 2, rng)
    capped = stratified_pick(returns, 7, rng, max_return=0.2)  # only returns <= 2 are eligible
    assert returns[capped].max() <= 2
    train, val = train_val_split(np.arange(12))
    assert train.tolist() == list(range(9)) and val.tolist() == [9, 10, 11]


def test_a_reward_growing_with_time_wins_heuristic_pairs_but_not_uniform_start_ones():
    """Planted: lengths independent of who won, and r(s_t) = t, a reward that knows nothing of the return.
    On progress-heuristic pairs (the better clip never starts earlier) it still ranks most pairs right;
    on pairs whose clips start anywhere in their demos it is at chance. Clip returns summed by a loop."""
    rng = np.random.default_rng(3)
    lengths, returns = rng.integers(60, 400, 200), rng.integers(0, 20, 200).astype(float)
    accuracy = {}
    for progress in (True, False):
        p = make_pairs(lengths, returns, 6000, np.random.default_rng(4), progress=progress)
        clip_returns = np.array(
            [[sum(range(s, s + n)) for s in starts] for starts, n in zip(p.start, p.length, strict=True)]
        )
        accuracy[progress] = pair_accuracy(clip_returns)
    assert accuracy[True] > 0.75
    assert abs(accuracy[False] - 0.5) < 0.025
