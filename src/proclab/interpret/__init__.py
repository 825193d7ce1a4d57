"""Interpretation of agents and world models, one sub-package per kind of evidence.

* :mod:`.workspace`: the analysis folder and what every ``proclab analyze`` command shares;
* :mod:`.bases`: coordinate systems of the hidden state (PCA/ICA, NMF, sparse dictionaries);
* :mod:`.stats`: paired intervals, permutation tests, multiple-testing corrections, clustering;
* :mod:`.states`: maps of hidden states, world-model environment states and bottleneck vectors;
* :mod:`.saliency`: gradients on real frames and through the simulator, generative visualisation;
* :mod:`.interventions`: edits of directions and batched paired play; :mod:`.sweep`: the sweep;
* :mod:`.behaviours`: behaviour clusters of simulated rollouts and their dynamics;
* :mod:`.atlas`: one card per direction joining the rest.

:mod:`.cli` is ``proclab analyze``, which dispatches to each room's command.
"""
