"""Edits of hidden-state directions: the edited agent, where each edit holds a coordinate, batched paired
play, and ``analyze intervene``."""
