"""Statistics that belong to the analyses: the two arms of an intervention compared unit by unit as the
analyses report them, claims over a sweep's directions, equivalence verdicts, shares of directions, and
clustering fitted on a subsample and assigned to every point. The general statistics they are built from
(intervals, bootstraps, permutation p-values, McNemar, corrections) are :mod:`proclab.stats`."""
