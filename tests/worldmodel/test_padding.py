"""Teacher forcing's reward and done never read the padding past an episode's end: the step after an episode's
last action has no frame (zeros), and its reward and done still count in the loss. Read from the posterior of
that black frame, the heads learn "black frame = the coin, the end"; the fixed pass reads them from the prior's
state, which does not see the frame of its step."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from proclab.models import AgentConfig, build_agent
from proclab.models.loading import freeze
from proclab.worldmodel.batch import synthetic_batch
from proclab.worldmodel.clustered import auc
from proclab.worldmodel.config import wm_size
from proclab.worldmodel.model import WorldModel
from proclab.worldmodel.simulate import frame_before, teacher_forced
from support import TINY_AGENT

TINY = wm_size("tiny")
S = TINY.model.num_sim_steps


def _models(seed: int = 0):
    torch.manual_seed(seed)
    agent = freeze(build_agent(AgentConfig(core="gru", rnn_size=16, head_init="torch", **TINY_AGENT)))
    return WorldModel(TINY.model, 15, agent.state_shapes()), agent


def _reading_padding(wm, agent, batch):
    """The old teacher-forced pass: the posterior of every frame label, padding included."""
    start = wm.start(wm.encode(batch.init_frames))
    start = replace(start, agent_state=batch.agent_h0, frame=frame_before(batch))
    return wm.simulate(
        agent,
        start,
        S,
        actions=batch.prev_action_one_hot(wm.num_actions),
        frames=batch.frames,
        observe=True,
    )


def _ending_batch(B: int, generator: torch.Generator):
    """Random frames and actions; an episode ends after the action of step ``k >= 1`` with the same chance
    at every step (so time tells nothing), with reward 1 and done there (the coin) and zero padding as
    that step's frame; some windows do not end. Nothing but the padding tells where the reward is."""
    batch = synthetic_batch(TINY.model, 16, B)
    batch.frames = torch.randint(0, 256, batch.frames.shape, dtype=torch.uint8, generator=generator)
    batch.prev_actions = torch.randint(0, 15, (S, B), generator=generator)
    ends = torch.rand(S, B, generator=generator) < 0.35
    ends[0] = False
    ends[-1] |= True
    end = ends.float().argmax(0)  # the first step whose frame is padding
    end = torch.where(torch.rand(B, generator=generator) < 0.25, S, end)  # no end within the window
    k = torch.arange(S)[:, None]
    batch.frames[k.expand(S, B) >= end] = 0
    batch.frame_mask = k < end
    batch.prev_mask = k <= end  # the terminal step's reward and done count
    batch.state_mask = batch.frame_mask.clone()
    batch.reward = (k == end).float()
    batch.done = (k == end).float()
    return batch, end


def test_the_terminal_steps_reward_does_not_depend_on_what_fills_the_padding():
    wm, agent = _models()
    wm.eval()
    batch, _ = _ending_batch(4, torch.Generator().manual_seed(0))
    white = replace(batch, frames=torch.where(batch.frame_mask[..., None, None, None], batch.frames, 255))
    with torch.no_grad():
        black_traj = teacher_forced(wm, agent, batch, modal=True)[1]
        white_traj = teacher_forced(wm, agent, white, modal=True)[1]
        old_black, old_white = (_reading_padding(wm, agent, b) for b in (batch, white))
    torch.testing.assert_close(black_traj.reward, white_traj.reward)
    torch.testing.assert_close(black_traj.done_logit, white_traj.done_logit)
    # the old pass read the padding: its terminal reward moves with the padding's colour
    padded = ~batch.frame_mask
    assert not torch.allclose(old_black.reward[padded], old_white.reward[padded])


@pytest.mark.slow
def test_a_reward_that_coincides_with_padding_is_learned_only_by_the_pass_that_reads_padding():
    """Planted: the reward comes exactly at the padded step and nothing else predicts it. Trained on the
    reward and done terms, the old pass learns "black = reward" (AUC near 1 on fresh windows); the fixed one
    cannot (near 0.5). The fast test above covers the mechanism."""

    def trained_auc(forward) -> float:
        wm, agent = _models(1)
        opt = torch.optim.Adam(wm.parameters(), lr=1e-2)
        gen = torch.Generator().manual_seed(2)
        for _ in range(25):
            batch, _ = _ending_batch(16, gen)
            traj = forward(wm, agent, batch)
            m = batch.prev_mask.float()
            loss = ((traj.reward - batch.reward).pow(2) * m).sum() + (
                torch.nn.functional.binary_cross_entropy_with_logits(
                    traj.done_logit, batch.done, reduction="none"
                )
                * m
            ).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        batch, _ = _ending_batch(64, torch.Generator().manual_seed(3))
        with torch.no_grad():
            traj = forward(wm, agent, batch)
        counted = batch.prev_mask.numpy()
        counted[0] = False  # step 0's reward (of the action before the window) never coincides with an end
        return auc(traj.reward.numpy()[counted], batch.reward.numpy()[counted] > 0)

    old = trained_auc(_reading_padding)
    fixed = trained_auc(lambda wm, agent, batch: teacher_forced(wm, agent, batch)[1])
    assert old > 0.95, old
    assert fixed < 0.75, fixed
    assert np.isfinite(fixed)
