"""Maps of states: the agent's hidden states (``analyze hidden``), the world model's environment states
(``analyze env``) and its bottleneck vectors (``analyze bottleneck``)."""
