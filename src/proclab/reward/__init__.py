"""T-REX on Procgen: learn a reward from demos ranked by return, measure it, train a policy on it.

``record_demos`` records demos (``proclab trex demos``: one episode per level, checkpoints of
varied skill) into an episode store; ``demo_reader`` reads them back; ``pairs`` picks demos and
builds clip pairs; ``loss`` is the Bradley-Terry objective; ``nets`` the reward networks;
``train`` the (batched or seed-parity) training loop and its held-out-level metrics
(``metrics``); ``grid`` and ``plots`` the study; ``wrapper`` and ``policy`` PPO on the learned
reward; ``command`` the ``proclab trex`` commands. docs/trex.md has the whole workflow,
docs/notebooks/trex.ipynb a small one in Python::

    from proclab.reward.record_demos import trex_demos   # also proclab.trex_demos
    from proclab.reward.train import train_trex           # also proclab.train_trex

    demos = trex_demos([ppo_run], "coinrun", out=path, train=60, test=30)   # an episode store of demos
    reward_model = train_trex(demos, num_demos=40, time_limit=30)             # a RewardModel
    evaluation = evaluate_trex(reward_model, demos=demos)                     # a TrexEvaluation
    evaluation.table(); evaluation.plot()
"""

from proclab.reward.evaluation import TrexEvaluation, TrexEvaluationSettings, evaluate_trex
from proclab.reward.metrics import correlations, pair_accuracy
from proclab.reward.nets import RewardModel, RewardNet, RewardNetConfig, load_reward_model, predict_rewards
from proclab.reward.pairs import ClipPairs, make_pairs, stratified_pick
from proclab.reward.wrapper import LearnedRewardEnv

__all__ = [
    "ClipPairs",
    "LearnedRewardEnv",
    "RewardModel",
    "RewardNet",
    "RewardNetConfig",
    "TrexEvaluation",
    "TrexEvaluationSettings",
    "correlations",
    "evaluate_trex",
    "load_reward_model",
    "make_pairs",
    "pair_accuracy",
    "predict_rewards",
    "stratified_pick",
]
