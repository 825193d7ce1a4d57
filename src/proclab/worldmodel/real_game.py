"""The real game in the agent's closed loop: the frame error a perfect simulator would have.

``wm evaluate``'s closed loop lets the agent choose its actions on the dream's frames and compares
the dream with the *recorded* frames. The recorded episode followed the actions the agent drew when
it was recorded; an agent that acts otherwise (its modal action, or another draw of its policy)
leads the real game elsewhere too, so even an exact simulator of the game does not reach zero
closed-loop error, and at long horizons it need not beat the level's mean frame (under MSE an
average over the possible futures beats any one of them). The closed loop's error therefore has a
floor that no world model can go below, and this module measures it on the same windows: each
window's game state at step 0 is rebuilt by replaying the episode's recorded actions from its first
state (the store's ``initial_state``, which carries the game's random state, so the replay is
exact and is checked frame for frame), the agent starts from its recorded state, and the real game
is played in the same closed loop as the dream, ``steps`` frames.

An episode that ends in the real game before ``steps`` keeps its last frame (the game would start
another level, which no dream draws); the recorded frames after the recorded end are masked by the
evaluation as for every mode.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.errors import ProclabError
from proclab.store import EpisodeStore
from proclab.store.schema import INITIAL_STATE, has_first_states


class RealGame:
    """Windows of a store's episodes played again in the real game, the agent in the loop.

    ``env_config`` is the agent's environment (its game and options: the recorded states were drawn
    with them). One env replays each window's recorded actions up to its step 0; another of as many
    slots as windows then plays all windows together, one batched agent forward per step.
    """

    def __init__(self, store: EpisodeStore, env_config: EnvConfig, seed: int = 0):
        if not has_first_states(store):
            raise ProclabError(
                f"episode store {str(store.path)!r} holds no first game states (recorded with --no-ground-truth "
                "or before proclab stored them): the real game cannot be replayed"
            )
        self.store, self.seed = store, seed
        self.config = replace(env_config, num_envs=1)
        self._replayer = ProcgenVecEnv(self.config, seed=seed)
        self._replayer.reset()

    def state_at(self, episode: int, step: int) -> bytes:
        """The game state of ``episode`` at ``step``: its first state, its recorded actions replayed; the
        replayed frame must be the recorded one (else the store's game options are not the agent's)."""
        rec = self.store.read(episode, ["obs", "action"], 0, step + 1)
        env = self._replayer
        env.set_slot_state(0, self.store.read_blob(INITIAL_STATE, episode))
        for t, a in enumerate(rec["action"][:step]):
            _, _, terminated, truncated, _ = env.step(np.array([a]))
            if terminated[0] or truncated[0]:
                raise ProclabError(
                    f"episode {episode} ended after {t + 1} replayed steps, before step {step}"
                )
        if not np.array_equal(env.observe()[0], rec["obs"][step]):
            raise ProclabError(
                f"replaying episode {episode} of {str(self.store.path)!r} to step {step} does not give its recorded "
                "frame: the store was recorded with other game options than the agent's"
            )
        return env.slot_state(0)

    @torch.no_grad()
    def play(
        self,
        agent,
        states: list[bytes],
        agent_state: dict[str, torch.Tensor],
        steps: int,
        *,
        greedy: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(steps + 1, B, 3, 64, 64)`` uint8: frame 0 of each window's state, then ``steps`` frames of the
        real game with the agent (starting from ``agent_state``, batch-first) acting greedily or
        sampling its policy (with ``generator``); and ``(steps, B)`` the actions it took on frames
        ``0 .. steps - 1``."""
        B = len(states)
        env = ProcgenVecEnv(replace(self.config, num_envs=B), seed=self.seed)
        try:
            env.reset()
            for slot, s in enumerate(states):
                env.set_slot_state(slot, s)
            frames = [torch.from_numpy(env.observe().copy())]
            ended = np.zeros(B, bool)
            first = torch.zeros(B, dtype=torch.bool)
            taken = []
            for _ in range(steps):
                out, agent_state = agent.step(frames[-1], agent_state, first)
                logits = out.logits.float()
                if greedy:
                    actions = logits.argmax(1)
                else:
                    actions = torch.multinomial(torch.softmax(logits, 1), 1, generator=generator)[:, 0]
                taken.append(actions.cpu())
                obs, _, terminated, truncated, _ = env.step(actions.cpu().numpy())
                ended |= terminated | truncated
                frames.append(
                    torch.where(
                        torch.from_numpy(ended)[:, None, None, None], frames[-1], torch.from_numpy(obs)
                    )
                )
        finally:
            env.close()
        return torch.stack(frames), torch.stack(taken)
