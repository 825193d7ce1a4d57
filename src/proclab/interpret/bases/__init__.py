"""Coordinate systems of the hidden state: activations read from a store, the PCA/ICA basis, NMF, sparse
dictionaries, and the encode/decode view of each that the interventions and the atlas take."""
