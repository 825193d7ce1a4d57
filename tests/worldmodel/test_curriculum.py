"""The horizon curriculum: which steps each update trains on, and a batch cut to them."""

from dataclasses import replace

import pytest
import torch

from proclab.errors import ProclabError
from proclab.worldmodel.batch import synthetic_batch
from proclab.worldmodel.config import wm_size


def test_the_schedule_gives_each_update_its_horizon():
    cfg = replace(wm_size("small"), curriculum="3:4,5:8")  # small simulates 16 steps
    assert [cfg.horizon(u) for u in range(7)] == [4, 4, 4, 8, 8, 16, 16]
    assert replace(cfg, curriculum="").horizon(0) == 16
    assert replace(cfg, curriculum="10:40").horizon(0) == 16  # never more than the window holds
    for bad in ("4", "a:4", "3:0", "3:-1"):
        with pytest.raises(ProclabError, match="--curriculum"):
            replace(cfg, curriculum=bad).validate()


def test_a_batch_cut_to_its_first_steps_keeps_everything_else():
    config = replace(wm_size("tiny").model, num_sim_steps=4)
    batch = synthetic_batch(config, 3, 2)
    cut = batch.first_steps(2)
    for name in ("frames", "prev_actions", "reward", "done", "agent_states", "actions", "frame_mask"):
        torch.testing.assert_close(getattr(cut, name), getattr(batch, name)[:2])
    torch.testing.assert_close(cut.init_frames, batch.init_frames)
    torch.testing.assert_close(cut.agent_h0, batch.agent_h0)
    assert batch.first_steps(4) is batch


def test_training_on_the_curriculum_simulates_the_scheduled_steps(make_config, monkeypatch):
    import proclab.worldmodel.trainer as train_module

    seen = []
    real = train_module.teacher_forced

    def watched(wm, agent, batch, *args, **kwargs):
        seen.append(batch.frames.shape[0])
        return real(wm, agent, batch, *args, **kwargs)

    monkeypatch.setattr(train_module, "teacher_forced", watched)
    cfg = make_config(total_updates=4, curriculum="2:2")
    train_module.train_world_model(cfg.data, cfg, progress=False)
    assert seen[:4] == [2, 2, cfg.model.num_sim_steps, cfg.model.num_sim_steps]
