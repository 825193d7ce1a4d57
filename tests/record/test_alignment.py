"""The timestep convention, checked row by row: a scripted env and agent whose every output is known."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.models import AgentConfig, AgentOutput, build_agent
from proclab.record import ActionNoise, EpisodeRecorder
from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore, ShardWriter
from support import TINY_AGENT

# Episode lengths per env slot, played in turn. 300 > the recorder's initial 256-row buffer,
# and a 300-step episode counts as truncated (a pretend time limit).
LENGTHS = [[3, 300, 5, 2], [1, 7, 2, 9], [4, 4, 260, 1]]
TIME_LIMIT = 300


def encode_t(obs: np.ndarray, t: np.ndarray) -> None:
    obs[:, 0, 0, 0], obs[:, 0, 0, 1] = t % 256, t // 256


def decode_t(obs) -> np.ndarray:
    return obs[:, 0, 0, 0].astype(np.int64) + 256 * obs[:, 0, 0, 1].astype(np.int64)


class ScriptedEnv:
    """Obs encode (step in episode, slot, episode number); reward = action + t / 100."""

    games = ("coinrun", "bigfish")

    def __init__(self):
        self.num_envs = len(LENGTHS)
        self.game_index = np.arange(self.num_envs) % 2
        self.t = np.zeros(self.num_envs, np.int64)
        self.ep = np.zeros(self.num_envs, np.int64)
        self.ret = np.zeros(self.num_envs)

    def _obs(self):
        obs = np.zeros((self.num_envs, 3, 64, 64), np.uint8)
        encode_t(obs, self.t)
        obs[:, 0, 0, 2], obs[:, 0, 0, 3] = np.arange(self.num_envs), self.ep
        return obs, {"level_seed": self.level_seed()}

    def level_seed(self):
        return 1000 * np.arange(self.num_envs) + self.ep

    def length(self):
        return np.array([LENGTHS[i][self.ep[i] % 4] for i in range(self.num_envs)])

    def reset(self):
        return self._obs()

    def step(self, actions):
        reward = (actions + self.t / 100).astype(np.float32)
        self.ret += reward
        self.t += 1
        done = self.t == self.length()
        truncated = done & (self.t == TIME_LIMIT)
        episode = {
            "done": done,
            "return": np.where(done, self.ret, 0),
            "length": np.where(done, self.t, 0),
            "level_seed": np.where(done, self.level_seed(), -1),
            "level_complete": done & ~truncated,
        }
        self.t[done], self.ret[done] = 0, 0
        self.ep[done] += 1
        obs, info = self._obs()
        return obs, reward, done & ~truncated, truncated, {**info, "episode": episode}


class ScriptedAgent:
    """value = 2t + slot; logits[a] = t/100 + a/10; the state counts steps since the episode began.

    ``core.0.h = [k, sum of t]`` and ``core.0.c = [previous raw reward]`` (one layer of two tensors),
    ``core.1.F`` a 2x2 matrix ``k * I``: the recorder must concatenate and reset all of them.
    """

    config = AgentConfig(prev_reward=True)  # the actor zeroes the previous reward on a first frame

    def state_shapes(self):
        return {"core.0.h": (2,), "core.0.c": (1,), "core.1.F": (2, 2)}

    def initial_state(self, batch, device=None):
        return {k: torch.zeros(batch, *s, device=device) for k, s in self.state_shapes().items()}

    def step(self, obs, state, first, prev_reward=None):
        t = torch.from_numpy(decode_t(obs.numpy())).float()
        keep = (~first).float()
        h = state["core.0.h"] * keep[:, None] + torch.stack([torch.ones_like(t), t], 1)
        F = state["core.1.F"] * keep[:, None, None] + torch.eye(2)
        logits = t[:, None] / 100 + torch.arange(15.0)[None] / 10
        value = 2 * t + obs[:, 0, 0, 2].float()
        return AgentOutput(logits, value), {
            "core.0.h": h,
            "core.0.c": prev_reward[:, None].clone(),
            "core.1.F": F,
        }


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    noise = ActionNoise.parse("scale=0.5,set=9-14:-1e4")
    recorder = EpisodeRecorder(
        ScriptedEnv(),
        ScriptedAgent(),
        make_runtime("cpu", "fp32"),
        noise=noise,
        reward_scale=2.0,
        reward_clip=3.0,
        split="train",
    )
    path = tmp_path_factory.mktemp("aligned") / "store"
    with ShardWriter(path, commit_seconds=0, background=True) as writer:
        n = recorder.run(11, writer.append)
    return n, EpisodeStore(path, verify=True), noise


def test_every_field_lands_on_its_row(recorded):
    n, store, noise = recorded
    assert n == store.num_episodes == 11
    for ep in store:
        s, T = ep.steps, ep.length
        t = np.arange(T)
        slot, number = int(s["obs"][0, 0, 0, 2]), int(s["obs"][0, 0, 0, 3])
        assert LENGTHS[slot][number % 4] == T
        assert (decode_t(s["obs"]) == t).all() and (s["step"] == t).all()
        assert (s["obs"][:, 0, 0, 2] == slot).all() and (s["obs"][:, 0, 0, 3] == number).all()
        assert (s["value"] == 2 * t + slot).all()
        clean = t[:, None] / 100 + np.arange(15)[None] / 10
        np.testing.assert_allclose(s["logits_clean"], clean, rtol=1e-6)
        np.testing.assert_allclose(s["logits"], noise(torch.from_numpy(clean)).numpy(), rtol=1e-6)
        np.testing.assert_allclose(
            s["reward"], s["action"] + t / 100, rtol=1e-6
        )  # earned by the row's action
        np.testing.assert_allclose(s["reward_norm"], np.clip(s["reward"] / 2.0, -3, 3), rtol=1e-6)
        assert (s["action"] < 9).all()  # sampled from the noised policy, which rules out 9-14
        done = np.zeros(T, bool)
        done[-1] = True
        assert (s["terminated"] == (done & (T != TIME_LIMIT))).all()
        assert (s["truncated"] == (done & (T == TIME_LIMIT))).all()
        assert (s["level_seed"] == 1000 * slot + number).all() and ep.info[
            "level_seed"
        ] == 1000 * slot + number
        assert ep.info["game"] == ScriptedEnv.games[slot % 2] and ep.info["split"] == "train"
        assert ep.info["return"] == pytest.approx(float(s["reward"].astype(np.float64).sum()))
        assert ep.info["level_complete"] == (T != TIME_LIMIT)
        assert ep.final_obs is None  # Procgen never renders it; nothing is made up
        # core.0 = [h (2), c (1)], core.1 = F (2x2) raveled; state_out[t] is after processing obs_t
        k, tsum = t + 1, np.cumsum(t)
        prev_reward = np.concatenate([[0], s["reward"][:-1]])
        np.testing.assert_allclose(s["state_out/core.0"], np.stack([k, tsum, prev_reward], 1), rtol=1e-6)
        np.testing.assert_allclose(s["state_out/core.1"], np.stack([k, 0 * k, 0 * k, k], 1))
        for layer in ("core.0", "core.1"):  # entering step t: reset (zeros) at t=0, else leaving t-1
            assert (s[f"state_in/{layer}"][0] == 0).all()
            np.testing.assert_array_equal(s[f"state_in/{layer}"][1:], s[f"state_out/{layer}"][:-1])


def test_quotas_fix_the_episodes_per_slot(recorded):
    """11 episodes over 3 slots: 4, 4, 3, each slot's first ones, whatever their lengths."""
    _, store, _ = recorded
    slots = [int(store.read(i, ["obs"], 0, 1)["obs"][0, 0, 0, 2]) for i in range(len(store))]
    assert np.bincount(slots).tolist() == [4, 4, 3]
    numbers = sorted(
        (slot, int(store.read(i, ["obs"], 0, 1)["obs"][0, 0, 0, 3])) for i, slot in enumerate(slots)
    )
    assert numbers == [(0, k) for k in range(4)] + [(1, k) for k in range(4)] + [(2, k) for k in range(3)]


def test_real_env_level_seeds_and_returns():
    """Procgen: every step's level is its episode's level, and returns are the sums of raw rewards."""
    rt = make_runtime("cpu", "fp32")
    torch.manual_seed(0)
    agent = build_agent(AgentConfig(core="gru", rnn_size=8, **TINY_AGENT))
    env = ProcgenVecEnv(replace(EnvConfig(game=("bossfight",)), num_envs=3, split="train"), seed=3)
    store = []
    EpisodeRecorder(env, agent, rt).run(5, lambda steps, info: store.append((steps, info)))
    env.close()
    assert len(store) == 5
    for steps, info in store:
        assert (steps["level_seed"] == info["level_seed"]).all() and 0 <= info["level_seed"] < 200
        assert info["return"] == pytest.approx(float(steps["reward"].sum()), abs=1e-4)
        assert steps["terminated"][-1] or steps["truncated"][-1]
        assert not (steps["terminated"][:-1] | steps["truncated"][:-1]).any()
        assert steps["obs"].shape == (len(steps["step"]), 3, 64, 64) and steps["obs"].std() > 0


def test_float16_states_keep_the_convention(tmp_path):
    recorder = EpisodeRecorder(
        ScriptedEnv(), ScriptedAgent(), make_runtime("cpu", "fp32"), state_dtype="float16"
    )
    with ShardWriter(tmp_path / "s") as writer:
        recorder.run(3, writer.append)
    for ep in EpisodeStore(tmp_path / "s"):
        k = np.arange(ep.length) + 1
        assert ep["state_out/core.1"].dtype == np.float16 and ep.info["state_in0/core.0"].dtype == np.float16
        assert (ep["state_out/core.1"][:, 0] == k).all() and (ep["state_in/core.1"][1:, 0] == k[:-1]).all()


def test_high_resolution_frames():
    rt = make_runtime("cpu", "fp32")
    agent = build_agent(AgentConfig(**TINY_AGENT))
    env = ProcgenVecEnv(EnvConfig(game=("bossfight",), num_envs=1), seed=0, render_human=True)
    episodes = []
    EpisodeRecorder(env, agent, rt, human=True).run(1, lambda steps, info: episodes.append(steps))
    env.close()
    (steps,) = episodes
    assert (
        steps["obs_human"].shape == (len(steps["obs"]), 3, 512, 512) and steps["obs_human"].dtype == np.uint8
    )
    # the 512x512 view shows the same scene as the agent's 64x64 one (compare mean colours)
    small = steps["obs"].reshape(len(steps["obs"]), 3, -1).mean(-1)
    large = steps["obs_human"].reshape(len(steps["obs"]), 3, -1).mean(-1)
    assert np.abs(small - large).mean() < 20 and steps["obs_human"].std() > 0
