"""Paired binary outcomes with planted counts, shared by the tests of the exact McNemar test
(tests/stats) and of the analyses that report it (tests/interpret/stats)."""

import numpy as np


def paired_outcomes(lost: int, gained: int, both: int, neither: int) -> tuple[np.ndarray, np.ndarray]:
    """Two boolean arrays, one pair per unit in a seeded order: ``lost`` units true then false, ``gained``
    false then true, ``both`` true twice, ``neither`` false twice."""
    first = np.array([1] * lost + [0] * gained + [1] * both + [0] * neither, bool)
    second = np.array([0] * lost + [1] * gained + [1] * both + [0] * neither, bool)
    order = np.random.default_rng(lost * 100 + gained).permutation(len(first))
    return first[order], second[order]
