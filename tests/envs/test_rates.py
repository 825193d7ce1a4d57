"""The share of episodes that did something, as an evaluation reports it (its interval is
:func:`proclab.stats.proportions.clopper_pearson`, tested in tests/stats)."""

from proclab.envs.episodes import rate
from proclab.stats.proportions import clopper_pearson


def test_rate_counts_and_shares():
    assert rate([True, False, True, True]) == {
        "count": 3,
        "of": 4,
        "rate": 0.75,
        "ci95": list(clopper_pearson(3, 4)),
    }
    assert rate([])["rate"] is None and rate([])["ci95"] == [0.0, 1.0]
