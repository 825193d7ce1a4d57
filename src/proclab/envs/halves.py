"""One vector env made of two halves that can also be stepped one at a time.

:class:`HalvedVecEnv` has the API of :class:`~proclab.envs.vec_env.ProcgenVecEnv` (``step`` steps
both halves and joins their outputs) and, beside it, :meth:`HalvedVecEnv.step_half`, so that a
collector can step one half of the envs while the agent computes the other half's actions
(:mod:`proclab.rl.overlap`). Each half is its own procgen instance with its own thread pool.

Its saved state has the layout of a single ``ProcgenVecEnv`` of the same envs (each game's
per-env procgen states in slot order, episode counters joined), so a checkpoint written by one
kind of env resumes in the other: training on a GPU (halves) continues on a CPU (one env).
"""

from __future__ import annotations

import numpy as np

from proclab.envs.vec_env import EnvConfig, ProcgenVecEnv
from proclab.errors import ProclabError


def join_info(a: dict, b: dict) -> dict:
    """The info of envs ``a + b`` from the infos of two halves (arrays joined, nested dicts too)."""
    return {k: join_info(v, b[k]) if isinstance(v, dict) else np.concatenate([v, b[k]]) for k, v in a.items()}


class HalvedVecEnv:
    """``num_envs`` envs as two :class:`ProcgenVecEnv` halves (rows ``[0, n/2)`` and ``[n/2, n)``)."""

    def __init__(
        self,
        config: EnvConfig,
        seed: int = 0,
        *,
        num_envs: int | None = None,
        split=None,
        reward_rule: str = "",
    ):
        n = config.num_envs if num_envs is None else num_envs
        games = len(config.games())
        if n % (2 * games):
            raise ProclabError(
                f"num_envs={n} cannot be halved into equal halves of the {games} games; "
                "use an even number of envs per game"
            )
        # Distinct seeds per half: each half draws its own levels.
        self.halves = [
            ProcgenVecEnv(config, seed=2 * seed + h, num_envs=n // 2, split=split, reward_rule=reward_rule)
            for h in (0, 1)
        ]
        self.num_envs = n
        self.rows = [slice(0, n // 2), slice(n // 2, n)]
        self.games = self.halves[0].games
        self.split = self.halves[0].split
        self.game_index = np.concatenate([half.game_index for half in self.halves])

    def reset(self) -> tuple[np.ndarray, dict]:
        outs = [half.reset() for half in self.halves]
        return np.concatenate([o[0] for o in outs]), join_info(outs[0][1], outs[1][1])

    def step_half(self, h: int, actions: np.ndarray):
        """Step half ``h`` only: ``obs, reward, terminated, truncated, info`` of its envs."""
        return self.halves[h].step(actions)

    def step(self, actions):
        actions = np.asarray(actions)
        a, b = (self.step_half(h, actions[rows]) for h, rows in enumerate(self.rows))
        obs = np.concatenate([a[0], b[0]])
        return (
            obs,
            *(np.concatenate([x, y]) for x, y in zip(a[1:4], b[1:4], strict=True)),
            join_info(a[4], b[4]),
        )

    def observe(self) -> np.ndarray:
        return np.concatenate([half.observe() for half in self.halves])

    def close(self) -> None:
        for half in self.halves:
            half.close()

    def get_state(self) -> dict:
        """The state of one ``ProcgenVecEnv`` holding these envs (module docstring)."""
        a, b = (half.get_state() for half in self.halves)
        return {
            "procgen": [list(x) + list(y) for x, y in zip(a["procgen"], b["procgen"], strict=True)],
            "ep_return": np.concatenate([a["ep_return"], b["ep_return"]]),
            "ep_length": np.concatenate([a["ep_length"], b["ep_length"]]),
        }

    def set_state(self, state: dict) -> tuple[np.ndarray, dict]:
        per_game = [len(games) // 2 for games in state["procgen"]]
        outs = []
        for h, rows in enumerate(self.rows):
            part = {
                "procgen": [
                    list(g)[h * k : (h + 1) * k] for g, k in zip(state["procgen"], per_game, strict=True)
                ],
                "ep_return": np.asarray(state["ep_return"])[rows],
                "ep_length": np.asarray(state["ep_length"])[rows],
            }
            outs.append(self.halves[h].set_state(part))
        return np.concatenate([o[0] for o in outs]), join_info(outs[0][1], outs[1][1])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"HalvedVecEnv({self.halves[0]!r} x 2)"
