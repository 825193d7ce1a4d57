"""Behaviours of simulated rollouts and their dynamics: clusters of state sequences, IC cross-correlation and
cross-causation, and whether gradients and correlations agree (``analyze behaviours | xcorr | consistency``)."""
