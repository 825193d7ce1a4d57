"""`proclab wm sample`: deterministic given a seed, in the store's timestep convention, other agents too."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from proclab.cli import main as cli
from proclab.errors import ProclabError
from proclab.run.runtime import RuntimeConfig, make_runtime
from proclab.store import EpisodeStore
from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.sample import SamplingSettings, sample_rollouts
from proclab.worldmodel.simulate import dreamed
from support import disk_full

CPU = RuntimeConfig(device="cpu")
"""Where the samples are simulated (the other runtime flags at their defaults)."""


def steps_of(path: Path) -> list[dict[str, np.ndarray]]:
    store = EpisodeStore(path)
    return [store.read(i) for i in range(store.num_episodes)]


def test_sampling_is_deterministic_given_a_seed(trained_run, tmp_path):
    base = SamplingSettings(n=3, steps=4, videos=0, modal=False, greedy=False, batch_size=2)

    def sample(out, **fields):
        return steps_of(sample_rollouts(trained_run, out, replace(base, **fields), CPU, progress=False))

    for init in ("informed", "random"):
        a = sample(tmp_path / f"a-{init}", init=init)
        b = sample(tmp_path / f"b-{init}", init=init)
        c = sample(tmp_path / f"c-{init}", init=init, seed=1)
        assert all(np.array_equal(x[k], y[k]) for x, y in zip(a, b, strict=True) for k in x)
        assert not all(np.array_equal(x["obs"], z["obs"]) for x, z in zip(a, c, strict=True))


def test_samples_follow_the_timestep_convention(trained_run, tmp_path, capsys):
    out = tmp_path / "samples"
    cli(
        [
            "wm",
            "sample",
            str(trained_run),
            "--n",
            "3",
            "--steps",
            "5",
            "--init",
            "informed",
            "--out",
            str(out),
            "--videos",
            "2",
            "--device",
            "cpu",
            "--precision",
            "fp32",
        ]
    )
    assert "episode store" in capsys.readouterr().out
    store = EpisodeStore(out)
    assert store.num_episodes == 3 and sorted(p.name for p in (out / "videos").iterdir()) == [
        "sample_00000.mp4",
        "sample_00001.mp4",
    ]
    wm, agent, _ = load_world_model(trained_run, make_runtime("cpu", "fp32"))
    episodes = [store.episode(i) for i in range(3)]
    with torch.no_grad():  # replay the stored bottlenecks as one batch: modal and greedy, so deterministic
        bottleneck = torch.from_numpy(np.stack([ep.info["bottleneck"] for ep in episodes]))
        traj = dreamed(wm, agent, bottleneck, 6)
    frames = (traj.frame * 255).round().to(torch.uint8).numpy()

    def close(a, b):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-6, atol=1e-7)

    for b, ep in enumerate(episodes):
        assert ep.length == 5 and ep.info["init"] == "informed" and ep.info["source_episode"] >= 0
        assert np.array_equal(ep["obs"], frames[:5, b]) and np.array_equal(ep.final_obs, frames[5, b])
        assert np.array_equal(ep["action"], traj.action[:5, b].argmax(-1).numpy())
        # the reward of a_t is predicted on frame t + 1 and stored on row t
        close(ep["reward_norm"], traj.reward[1:, b])
        close(ep["done_prob"], torch.sigmoid(traj.done_logit[1:, b]))
        close(ep["state_out/core.0"], traj.agent_state[:5, b])
        close(ep["state_in/core.0"][0], traj.start.agent_state[b])
        close(ep["env_h"], traj.env_h[:5, b])


def test_other_agents_in_the_loop(trained_run, tmp_path):
    settings = SamplingSettings(n=2, steps=3, init="random", videos=0)

    def sample(agent, out):
        return sample_rollouts(trained_run, out, replace(settings, agent=agent), CPU, progress=False)

    right = EpisodeStore(sample("always-right", tmp_path / "right"))
    assert all((right.read(i, ["action"])["action"] == 7).all() for i in range(2))
    assert not any(f.startswith("state_out/") for f in right.fields)
    fresh = EpisodeStore(sample("untrained", tmp_path / "fresh"))
    assert (
        fresh.read(0, ["state_in/core.0"])["state_in/core.0"][0].tolist() == [0.0] * 16
    )  # its own initial state
    with pytest.raises(ProclabError, match="other fields"):
        sample("trained", tmp_path / "right")
    with pytest.raises(ProclabError, match="unknown agent 'always-rihgt'"):
        sample("always-rihgt", tmp_path / "x")


@pytest.mark.parametrize("where", ["shard-00000", "videos"])
def test_a_full_disk_is_one_line_and_leaves_no_temporary(trained_run, tmp_path, capsys, where):
    """The disk fills up while `wm sample` writes its store or a video: exit 2, one line naming the file."""
    out = tmp_path / "samples"
    argv = [
        "wm",
        "sample",
        str(trained_run),
        "--n",
        "3",
        "--steps",
        "5",
        "--out",
        str(out),
        "--device",
        "cpu",
    ]
    with disk_full(out, match=where), pytest.raises(SystemExit) as exit_:
        cli([*argv, "--videos", "1"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "No space left on device" in err, err
    assert ("episode store file" if where != "videos" else "video") in err and str(out) in err
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]
