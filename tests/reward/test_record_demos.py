"""`proclab trex demos`: one capped episode per level, levels held out between splits, ids, columns."""

import numpy as np
import pytest

from proclab.envs import EnvConfig
from proclab.errors import ProclabError
from proclab.io.checkpoint import save_checkpoint
from proclab.io.configs import to_dict
from proclab.models import AgentConfig, build_agent
from proclab.reward.record_demos import demo_id, record_demos
from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore
from support import TINY_AGENT

CPU = make_runtime("cpu", "fp32")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run directory with two checkpoints of a tiny bigfish agent."""
    run = tmp_path_factory.mktemp("run")
    config = AgentConfig(**TINY_AGENT)
    for step in (1000, 2000):
        agent = build_agent(config)
        meta = {
            "kind": "agent",
            "step": step,
            "agent": to_dict(config),
            "env": to_dict(EnvConfig(game=("bigfish",))),
        }
        save_checkpoint(run / "checkpoints" / f"step_{step:012d}", agent.state_dict(), meta)
    return run


def test_demo_ids_spell_the_level_seed():
    assert demo_id(1_203_931_872) == "1_203_931_872" and demo_id(5) == "0_000_000_005"


def test_demos_one_capped_episode_per_held_out_level(run_dir, tmp_path):
    out = tmp_path / "demos"
    assert record_demos([run_dir], out, 5, "train", max_len=30, num_envs=2, progress=False, runtime=CPU) == 5
    assert (
        record_demos([run_dir], out, 3, "test", max_len=30, num_envs=2, seed=1, progress=False, runtime=CPU)
        == 3
    )
    store = EpisodeStore(out)
    e = store.episodes
    assert len(store) == 8 and set(e["game"]) == {"bigfish"} and set(e["mode"]) == {"easy"}
    train, test = e["split"] == "train", e["split"] == "test"
    assert (e["level_seed"][train] < 10**9).all() and (e["level_seed"][test] >= 10**9).all()
    assert len(set(e["level_seed"])) == 8
    assert [demo_id(s) for s in e["level_seed"]] == list(e["demo_id"])
    assert (e["length"] <= 30).all() and (e["truncated"] == (e["length"] == 30)).all()
    assert set(e["checkpoint"]) <= {str(p) for p in sorted((run_dir / "checkpoints").iterdir())}
    for i in range(len(store)):
        steps = store.read(i, ["obs", "action", "reward"])
        assert steps["obs"].shape == (e["length"][i], 3, 64, 64) and steps["obs"].dtype == np.uint8
        assert steps["reward"].sum() == pytest.approx(e["return"][i])


def test_levels_never_repeat_and_bad_requests_fail(run_dir, tmp_path):
    out = tmp_path / "demos"
    record_demos(
        [run_dir], out, 4, "train", levels="10:4", max_len=5, num_envs=4, progress=False, runtime=CPU
    )
    assert sorted(EpisodeStore(out).episodes["level_seed"]) == [10, 11, 12, 13]
    with pytest.raises(ProclabError, match="only 0 unused levels"):  # a test demo may not reuse a train level
        record_demos([run_dir], out, 1, "test", levels="10:4", max_len=5, progress=False, runtime=CPU)
    with pytest.raises(ProclabError, match="plays bigfish, not coinrun"):
        record_demos([run_dir], out, 1, "train", game="coinrun", progress=False, runtime=CPU)
    with pytest.raises(ProclabError, match="does not exist"):
        record_demos([tmp_path / "missing"], out, 1, "train", progress=False, runtime=CPU)
