"""How good a learned reward is: correlation of predicted with true returns, and pair accuracy.

The headline metric (as in the procedural-generalization study) is the Pearson and Spearman
correlation, across demos from held-out levels, between the true return and the predicted one
(the learned per-frame reward summed over the demo). It is always reported beside the trivial
"+1 per step" reward model, whose predicted return is the episode length: in games like
starpilot, where surviving longer means scoring more, that baseline is already near 0.96.
The correlations are :mod:`proclab.stats.correlation`'s.
"""

from __future__ import annotations

import numpy as np

from proclab.stats.correlation import pearson, spearman


def correlations(predicted, true, lengths) -> dict[str, float]:
    """Pearson/Spearman of predicted vs true returns, and of the +1/step baseline (lengths)."""
    return {
        "pearson": pearson(predicted, true),
        "spearman": spearman(predicted, true),
        "baseline_pearson": pearson(lengths, true),
        "baseline_spearman": spearman(lengths, true),
    }


def pair_accuracy(returns: np.ndarray) -> float:
    """Share of clip pairs ``(worse, better)`` (rows of ``returns``) ranked right; a tie counts half."""
    returns = np.asarray(returns)
    return float(np.mean((returns[:, 1] > returns[:, 0]) + 0.5 * (returns[:, 1] == returns[:, 0])))
