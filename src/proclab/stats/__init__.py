"""Statistics for every layer of proclab and for the notebooks: intervals of shares, the exact McNemar test
of paired binary outcomes, bootstrap intervals (rows or whole episodes resampled), permutation p-values,
Holm and Benjamini-Hochberg corrections, Pearson's and Spearman's correlations.

They sit on the ground floor, right above ``errors``, so that an evaluation (``envs``), a reward model's
report (``reward``), the world model's and the analyses' statistics all compute a number one way. scipy
computes what it provides (the exact and Wilson intervals, the binomial and Fisher tests, the false
discovery rate); the rest is written here with its reason in its module. Statistics that belong to one
analysis (claims over a sweep's directions, equivalence verdicts, clustering) stay with the analyses in
:mod:`proclab.interpret.stats`::

    import proclab
    proclab.stats.proportion(rollout.goals["coin"])                  # share of episodes, exact interval
    proclab.stats.mcnemar(plain.goals["coin"], edited.goals["coin"])  # the same levels under two conditions
    proclab.stats.holm([0.01, 0.04, 0.2])                            # adjusted p-values
"""

from proclab.stats.bootstrap import (
    bootstrap_ci,
    bootstrap_replicates,
    cluster_resamples,
    interval,
    percentile_interval,
    resamples,
    weights,
)
from proclab.stats.corrections import adjust, benjamini_hochberg, holm, interval_level
from proclab.stats.correlation import pearson, ranks, spearman
from proclab.stats.intervals import Interval
from proclab.stats.paired import McNemar, mcnemar
from proclab.stats.permutation import exact_permutation_p, permutation_p, sign_flips
from proclab.stats.proportions import (
    Proportion,
    ShareDifference,
    clopper_pearson,
    proportion,
    share_difference,
    wilson,
)

__all__ = [
    "Interval",
    "McNemar",
    "Proportion",
    "ShareDifference",
    "adjust",
    "benjamini_hochberg",
    "bootstrap_ci",
    "bootstrap_replicates",
    "clopper_pearson",
    "cluster_resamples",
    "exact_permutation_p",
    "holm",
    "interval",
    "interval_level",
    "mcnemar",
    "pearson",
    "percentile_interval",
    "permutation_p",
    "proportion",
    "ranks",
    "resamples",
    "share_difference",
    "sign_flips",
    "spearman",
    "weights",
    "wilson",
]
