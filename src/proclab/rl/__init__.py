"""Reinforcement learning: rollouts, GAE, PPO, the training loop, evaluation and rendering."""
