"""Edits of the agent's hidden state: the edited agent, where each edit holds a coordinate, batched paired
play, and ``analyze edit``, ``analyze intervene`` and ``analyze intervene-sim``."""
