"""T-REX on Procgen: learn a reward from demos ranked by return, measure it, train a policy on it.

``record_demos`` records demos (``proclab trex demos``: one episode per level, checkpoints of
varied skill) into an episode store; ``demo_reader`` reads them back; ``pairs`` picks demos and
builds clip pairs; ``loss`` is the Bradley-Terry objective; ``nets`` the reward networks;
``train`` the (batched or seed-parity) training loop and its held-out-level metrics
(``metrics``); ``grid`` and ``plots`` the study; ``wrapper`` and ``policy`` PPO on the learned
reward. docs/trex.md has the whole workflow.
"""

from proclab.reward.metrics import correlations, pair_accuracy, pearson, spearman
from proclab.reward.nets import RewardNet, RewardNetConfig, load_reward_model, predict_rewards
from proclab.reward.pairs import ClipPairs, make_pairs, stratified_pick
from proclab.reward.train import TrexConfig, train_reward
from proclab.reward.wrapper import LearnedRewardEnv

__all__ = [
    "ClipPairs",
    "LearnedRewardEnv",
    "RewardNet",
    "RewardNetConfig",
    "TrexConfig",
    "correlations",
    "load_reward_model",
    "make_pairs",
    "pair_accuracy",
    "pearson",
    "predict_rewards",
    "spearman",
    "stratified_pick",
    "train_reward",
]
