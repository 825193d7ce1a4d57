"""Imitation of a planner (``proclab.rl.imitation``): the teacher's cells against the level's own positions,
frames whose labels and cells belong to the state shown, the losses against a per-sample reference, a run
whose checkpoints ``proclab.load`` reads and which resumes to the same weights, and one-line refusals."""

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

import proclab
from proclab import Level
from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.errors import ProclabError
from proclab.io.checkpoint import load_checkpoint
from proclab.models.agent import build_agent
from proclab.models.config import AgentConfig
from proclab.models.planners import DOWN, LEFT, RIGHT, UP, MazePlanner
from proclab.rl.imitation import (
    CELLS,
    Frames,
    ImitationConfig,
    PositionHeads,
    gather,
    imitate,
    losses,
    teacher_labels,
)
from proclab.run.runtime import make_runtime
from support import TINY_AGENT

MOVES = {UP: (1, 0), DOWN: (-1, 0), LEFT: (0, -1), RIGHT: (0, 1)}


def test_the_teachers_cells_are_where_the_level_puts_the_mouse_and_the_cheese():
    for seed in (5, 17, 230):
        env = ProcgenVecEnv(EnvConfig(game=("maze",), split=f"{seed}:1", num_threads=1), num_envs=1)
        env.reset()
        actions, cells = teacher_labels(MazePlanner("cheese"), env)
        level = Level.generate("maze", seed)
        (mx, my), (cx, cy) = level.positions("agent")[0], level.positions("cheese")[0]
        assert cells[0].tolist() == [math.floor(my), math.floor(mx), math.floor(cy), math.floor(cx)]
        assert actions[0] in MOVES
        env.close()


def test_gathered_frames_carry_the_label_and_cells_of_the_state_they_show():
    """The teacher walks (no exploration): each frame's next cell is its cell moved by its label, and the
    frame itself changes exactly where the mouse left and arrived (its pixels belong to that state)."""
    rt = make_runtime("cpu", "fp32")
    env = ProcgenVecEnv(EnvConfig(game=("maze",), split="40:20", num_threads=1), num_envs=4)
    frames, played = gather(env, MazePlanner("cheese"), 200, np.random.default_rng(0), rt)
    env.close()
    assert frames.obs.shape == (200, 3, 64, 64) and frames.obs.dtype == np.uint8
    moved = 0
    for t in range(len(frames.actions) - 4):
        here, there = (
            frames.cells[t],
            frames.cells[t + 4],
        )  # four envs: row t + 4 is the same slot's next frame
        if (here[2:] != there[2:]).any() or here[0] < 0:
            continue  # another level began in that slot
        dr, dc = MOVES[int(frames.actions[t])]
        assert (there[0], there[1]) == (here[0] + dr, here[1] + dc)
        assert (frames.obs[t] != frames.obs[t + 4]).any()
        moved += 1
    assert moved > 100
    assert played["completed"] == 1.0 and played["episodes"] > 0  # the planner always reaches the cheese


def test_each_frame_is_the_view_of_the_state_its_label_was_read_from():
    """One env on one level: every episode starts there again, and each frame at the start cell is the view
    procgen draws of the level's first state (a frame taken one step late would show the mouse moved)."""
    seed = 77
    env = ProcgenVecEnv(EnvConfig(game=("maze",), split=f"{seed}:1", num_threads=1), num_envs=1)
    frames, played = gather(
        env, MazePlanner("cheese"), 80, np.random.default_rng(0), make_runtime("cpu", "fp32")
    )
    env.close()
    view = Level.generate("maze", seed).frames()[0].transpose(2, 0, 1)
    starts = np.flatnonzero((frames.cells == frames.cells[0]).all(1))
    assert played["episodes"] >= 2 and len(starts) >= 2
    for t in starts:
        assert np.array_equal(frames.obs[t], view)
    assert not np.array_equal(frames.obs[1], view)


def test_the_losses_match_a_per_sample_reference():
    torch.manual_seed(0)
    rt = make_runtime("cpu", "fp32")
    agent = build_agent(AgentConfig(**TINY_AGENT))
    heads = PositionHeads(agent.config.fc)
    n = 6
    obs = torch.randint(0, 255, (n, 3, 64, 64), dtype=torch.uint8)
    actions = torch.randint(0, 15, (n,))
    cells = torch.randint(0, 15, (n, 4))
    cells[2, 2:] = -1  # a level without its goal
    action_loss, position_loss, agreement = losses(agent, heads, obs, actions, cells, rt)

    def ce(z, k):
        z = [float(v) for v in z]
        top = max(z)
        return top + math.log(sum(math.exp(v - top) for v in z)) - z[k]

    with torch.no_grad():
        features = agent.torso(obs.float() / 255)  # the FC features, computed here without the hook
        logits = agent.heads(features)[0]
        where = heads(features)
    ref_action = sum(ce(logits[i], int(actions[i])) for i in range(n)) / n
    terms = [ce(where[i, j], int(cells[i, j])) for i in range(n) for j in range(4) if cells[i, j] >= 0]
    assert action_loss.item() == pytest.approx(ref_action, rel=1e-5)
    assert position_loss.item() == pytest.approx(sum(terms) / len(terms), rel=1e-5)
    assert float(agreement) == pytest.approx(float((logits.argmax(1) == actions).float().mean()))
    assert where.shape == (n, 4, CELLS)


def tiny(tmp_path, **changes) -> ImitationConfig:
    config = ImitationConfig(
        env=EnvConfig(game=("maze",), num_envs=4, split="0:50", level_rule="cheese-region:size=5", num_threads=1),
        agent=AgentConfig(**TINY_AGENT), rounds=3, frames=64, epochs=2, batch=16, run_root=tmp_path,
        precision="fp32", torch_threads=1,
    )  # fmt: skip
    return replace(config, **changes)


def test_a_run_writes_loadable_checkpoints_and_resumes_to_the_same_weights(tmp_path):
    whole = imitate(tiny(tmp_path / "a"), progress=False)
    steps = sorted(p.name for p in (whole / "checkpoints").glob("step_*"))
    assert steps == ["step_000000000064", "step_000000000128", "step_000000000192"]
    agent = proclab.load(str(whole))
    assert agent.env_config.level_rule == "cheese-region:size=5"
    ro = proclab.rollout(agent, levels="1000:2", episodes=2, num_envs=2)
    assert len(ro.lengths) == 2

    # stopped after a student's round (its sampling drew from torch's generator, which the resume restores)
    stopped = imitate(tiny(tmp_path / "b", rounds=2), progress=False)
    resumed = imitate(run_dir=stopped, progress=False, rounds=3)
    assert '"rounds": 3' in (stopped / "config.json").read_text()
    assert '"changed": {"rounds": [2, 3]}' in (stopped / "config_history.jsonl").read_text()
    a = load_checkpoint(whole / "checkpoints" / steps[-1]).weights
    b = load_checkpoint(resumed / "checkpoints" / steps[-1]).weights
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert Frames.load(resumed / "frames" / "round_2.npz").obs.shape == (64, 3, 64, 64)


@pytest.mark.parametrize(
    "changes, says",
    [
        ({"teacher": "coin-planner"}, "plays coinrun"),
        ({"agent": AgentConfig(core="gru", **TINY_AGENT)}, "feed-forward"),
        ({"explore": 1.5}, "share of steps"),
    ],
)
def test_bad_settings_are_one_line_errors(tmp_path, changes, says):
    with pytest.raises(ProclabError, match=says) as err:
        imitate(tiny(tmp_path, **changes), progress=False)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "imitation").exists()  # refused before anything is written


@pytest.mark.heavy
def test_the_position_benchmark_prints_both_students():
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "imitation_positions.py"
    done = subprocess.run(
        [sys.executable, str(script), "--frames", "512", "--batches", "2", "--every", "1", "--held-out", "256",
         "--precision", "fp32"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["position_coef"], r["batches"]) for r in rows] == [(0.0, 1), (0.0, 2), (1.0, 1), (1.0, 2)]
    assert all(0 <= r["held_out_agreement"] <= 1 and 0 < r["commonest_action"] <= 1 for r in rows)
