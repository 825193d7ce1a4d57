"""The intervention sweep: every arm on every direction in the real environment, its statistics, its table
and figure, and ``analyze sweep``."""
