"""Which goal an agent pursues, read from behaviour: maze geometry (paths, the decision square, Mini et al.'s
distances), the goals an episode reached, the decision-square analysis (``analyze decision-square``) and the
counterfactual behavioural label (``label``: each level played with goal A present and removed, checked on the
scripted policies of known goal of ``scripted``); and read from the interpretability tools: the goal-detection
benchmark's calls (``detect``: a probe, steering or sweep result to a call; ``calls``: calls scored against
behaviour)."""
