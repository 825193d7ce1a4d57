"""proclab: one toolkit for the whole life of an RL agent on OpenAI Procgen.

Layers (data flows left to right, lower layers never import higher ones):
``envs -> models -> rl -> data -> worldmodel -> interpret -> panel``, with ``reward`` beside ``rl``.
"""

__version__ = "0.1.0"
