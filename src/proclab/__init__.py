"""proclab: one toolkit for the whole life of an RL agent on OpenAI Procgen.

Layers (data flows left to right, lower layers never import higher ones; docs/architecture.md):
``errors, envs, io, store, run`` on the ground floor, then ``models -> rl -> record ->
worldmodel | reward -> interpret -> panel``.
"""

__version__ = "0.1.0"
