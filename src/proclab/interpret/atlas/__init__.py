"""The direction atlas (``analyze atlas``): per direction, what activates it, what it tracks, what it causes,
what it looks at, and whether gradients predict its effects, joined into one card."""
