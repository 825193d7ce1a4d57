"""Which goal an agent pursues, read from behaviour: maze geometry (paths, the decision square, Mini et al.'s
distances), the goals an episode reached, and the decision-square analysis (``analyze decision-square``); and read
from the interpretability tools: the goal-detection benchmark's calls (``detect``: a probe, steering or sweep
result to a call; ``calls``: calls scored against behaviour)."""
