"""Statistics the analyses share: paired bootstrap intervals and permutation tests, corrections for many tests,
and clustering fitted on a subsample and assigned to every point."""
