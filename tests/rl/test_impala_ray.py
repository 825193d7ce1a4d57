"""IMPALA with Ray actors (``--ray-address local``): the same run as with processes, and a killed
Ray actor is replaced. Needs ``pip install 'proclab[distributed]'``."""

import threading
import time

import pytest

from proclab.envs import EnvConfig
from proclab.io.run_dirs import read_metrics
from proclab.models import AgentConfig
from proclab.rl.config import ImpalaConfig, TrainConfig
from support import TINY_AGENT

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.distributed


def test_ray_actors_train_and_are_replaced_when_killed(tmp_path, capsys):
    from proclab.rl.impala_train import ImpalaTrainer

    config = TrainConfig(
        env=EnvConfig(game=("bossfight", "chaser"), num_envs=4),
        agent=AgentConfig(core="lstm", rnn_size=16, prev_reward=True, **TINY_AGENT),
        impala=ImpalaConfig(
            num_actors=2, unroll_length=16, batch_size=4, total_steps=64 * 30, ray_address="local"
        ),
        algo="impala",
        val_split="val",
        val_num_envs=2,
        run_root=tmp_path,
        device="cpu",
        torch_threads=1,
        tensorboard=False,
    )
    trainer = ImpalaTrainer(config)
    killed = []

    def kill_actor_0():
        deadline = time.time() + 300
        while trainer.learner.updates < 2 and time.time() < deadline:
            time.sleep(0.01)
        if 0 in trainer.pool.handles:
            ray.kill(trainer.pool.handles[0])
            killed.append(0)

    killer = threading.Thread(target=kill_actor_0)
    killer.start()
    run = trainer.train(progress=False)
    killer.join()
    assert killed
    m = read_metrics(run)
    assert m["step"][-1] == 64 * 30
    assert m["charts/actor_restarts"][-1] == 1
    assert any(r == r for r in m["charts/episodic_return"])
    assert "Ray actor 0 died" in capsys.readouterr().err
