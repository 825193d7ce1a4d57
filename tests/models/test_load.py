"""``load``: one call for a proclab run, a foreign checkpoint (converted in memory, nothing written) or a
published agent's name (downloaded once, from a web server on the loopback here, then cached).

The independent reference for a foreign file is ``proclab import`` of it followed by ``load_agent`` of the
run directory that wrote: the same observations must give the same logits and values, bit for bit.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from foreign_agents import VARIANTS, TorchbeastRef, TrainProcgenRef, game_of
from proclab.errors import ProclabError
from proclab.models.importers.command import ImportArgs, import_agent
from proclab.models.importers.published import PUBLISHED, REGISTRY
from proclab.models.loading import load, load_agent
from proclab.run.runtime import make_runtime
from support import make_agent_checkpoint

NAME = "coinrun/interpreting-rl-behavior"


def _outputs(agent, steps: int = 6, batch: int = 4) -> torch.Tensor:
    """Logits and value of ``steps`` steps on fixed random frames, episode starts and previous rewards."""
    g = torch.Generator().manual_seed(0)
    state, rows = agent.initial_state(batch), []
    with torch.inference_mode():
        for t in range(steps):
            obs = torch.randint(0, 256, (batch, 3, 64, 64), dtype=torch.uint8, generator=g)
            first = (torch.rand(batch, generator=g) < 0.3) | (t == 0)
            reward = torch.randn(batch, generator=g) * 2
            out, state = agent.step(obs, state, first, reward if agent.config.prev_reward else None)
            rows.append(torch.cat([out.logits, out.value[:, None]], 1))
    return torch.stack(rows)


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def _refused(match: str, source, **kw) -> str:
    with pytest.raises(ProclabError, match=match) as err:
        load(source, "cpu", "fp32", **kw)
    assert "\n" not in str(err.value)
    return str(err.value)


# -- a foreign checkpoint ----------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["train-procgen-gru", "pufferlib-lstm", "torchbeast-srwm", "cleanba"])
def test_a_foreign_file_loads_as_its_import_does_and_nothing_is_written(tmp_path, monkeypatch, variant):
    factory, filename, _ = VARIANTS[variant]
    ref = factory()
    (tmp_path / "in").mkdir()
    src = ref.save(tmp_path / "in" / filename)
    monkeypatch.chdir(tmp_path)  # a relative write (runs/import/...) would show in the listing
    monkeypatch.setenv("PROCLAB_CACHE", str(tmp_path / "cache"))
    before = _listing(tmp_path)
    agent = load(src, "cpu", "fp32", game=game_of(ref))
    assert _listing(tmp_path) == before

    run, _ = import_agent(ImportArgs(source=src, game=game_of(ref), out=tmp_path / "run"))
    reference, env, _ = load_agent(run, make_runtime("cpu", "fp32"))
    assert torch.equal(_outputs(agent), _outputs(reference))
    assert agent.env_config == env and agent.source == str(src)
    assert agent.runtime.device.type == "cpu" and not agent.runtime.bf16
    assert not agent.training and not any(p.requires_grad for p in agent.parameters())


def test_a_directory_stands_for_its_checkpoint_and_the_caller_sets_the_environment(tmp_path):
    ref = TrainProcgenRef()
    for steps in (64, 128):
        ref.save(tmp_path / f"model_{steps}.pth")
    agent = load(tmp_path, "cpu", "fp32", game="coinrun", mode="hard", split="0:500", backgrounds=False)
    env = agent.env_config
    assert (env.game, env.mode, env.split, env.use_backgrounds) == (("coinrun",), "hard", "0:500", False)


def test_the_file_says_the_environment_where_it_can(tmp_path):
    agent = load(TorchbeastRef(core="lstm").save(tmp_path / "model.tar"), "cpu", "fp32")
    assert (agent.env_config.game, agent.env_config.split) == (("bigfish",), "0:200")  # from its flags


# -- a published agent's name ------------------------------------------------------------------------
@pytest.fixture
def published(loopback, monkeypatch):
    """The registry's CoinRun entry pointed at a small train-procgen file served on the loopback."""
    served = TrainProcgenRef().save(loopback.folder / "model_4096.pth")
    data = served.read_bytes()
    entry = replace(
        REGISTRY[NAME],
        url=loopback.url(served.name),
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
    )
    monkeypatch.setitem(REGISTRY, NAME, entry)
    monkeypatch.setitem(PUBLISHED, entry.sha256, entry)
    return entry


def test_a_published_agent_is_downloaded_once_then_loaded_from_the_cache(
    published, loopback, tmp_path, monkeypatch
):
    monkeypatch.setenv("PROCLAB_CACHE", str(tmp_path / "cache"))
    first = load(NAME, "cpu", "fp32")
    cached = tmp_path / "cache" / "agents" / NAME / published.file_name
    assert cached.is_file() and loopback.requests == ["/model_4096.pth"]
    env = first.env_config
    assert (env.game, env.mode, env.split, env.use_backgrounds) == (("coinrun",), "hard", "train-1m", False)
    assert first.source == NAME
    loopback.stop()
    again = load(NAME, "cpu", "fp32")
    assert torch.equal(_outputs(again), _outputs(first)) and len(loopback.requests) == 1
    assert torch.equal(_outputs(load(cached, "cpu", "fp32")), _outputs(first))  # the file itself, by its hash


def test_cache_dir_says_where_downloads_go(published, tmp_path):
    load(NAME, "cpu", "fp32", cache_dir=tmp_path / "mine")
    assert (tmp_path / "mine" / NAME / published.file_name).is_file()


def test_a_wrong_hash_is_refused_and_nothing_is_cached(published, tmp_path, monkeypatch):
    monkeypatch.setitem(REGISTRY, NAME, replace(published, sha256="0" * 64))
    _refused("has SHA-256.*deleted", NAME, cache_dir=tmp_path / "cache")
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_a_server_error_is_one_line_naming_the_url(published, loopback, tmp_path, monkeypatch):
    url = loopback.url("gone.pth")
    monkeypatch.setitem(REGISTRY, NAME, replace(published, url=url))
    message = _refused("HTTP 404", NAME, cache_dir=tmp_path / "cache")
    assert url in message and "by hand" in message


def test_the_registry_names_pinned_files_and_their_settings():
    assert sorted(REGISTRY) == ["coinrun/interpreting-rl-behavior", "maze/goal-misgeneralization"]
    for agent in REGISTRY.values():
        assert PUBLISHED[agent.sha256] is agent and agent.url.endswith(agent.file_name)
        assert len(agent.sha256) == 64 and agent.size > 0
    maze = REGISTRY["maze/goal-misgeneralization"]
    assert (maze.game, maze.mode, maze.split, maze.use_backgrounds) == ("maze", "easy", "all", True)
    assert "ee2ca6f6ecc420bd5a4a2e59c11e6467c73b5ea2" in maze.url


# -- a proclab run -----------------------------------------------------------------------------------
def test_a_proclab_run_loads_as_load_agent_does(tmp_path):
    checkpoint = make_agent_checkpoint(tmp_path / "run")
    run = tmp_path / "run"
    reference, env, _ = load_agent(run, make_runtime("cpu", "fp32"))
    for source in (run, checkpoint):
        agent = load(source, "cpu", "fp32")
        assert torch.equal(_outputs(agent), _outputs(reference))
        assert agent.env_config == env == reference.env_config and agent.source == str(source)
        assert not agent.training and not any(p.requires_grad for p in agent.parameters())
    assert reference.source == str(run) and not reference.runtime.bf16


def test_a_proclab_run_refuses_a_setting_it_contradicts(tmp_path):
    make_agent_checkpoint(tmp_path / "run")  # coinrun, easy, levels train (0:200), no backgrounds
    run = tmp_path / "run"
    _refused("plays game coinrun, not bigfish; drop game=$", run, game="bigfish")
    _refused("plays mode easy, not hard", run, mode="hard")
    _refused("plays split train, not 0:500", run, split="0:500")
    _refused("plays backgrounds False, not True", run, backgrounds=True)
    agent = load(run, "cpu", "fp32", game="coinrun", split="0:200", backgrounds=False)
    assert agent.env_config.split == "train"


# -- bad input ---------------------------------------------------------------------------------------
def test_bad_sources_are_one_line(tmp_path):
    message = _refused("nor a published agent", str(tmp_path / "nothing-here"))
    assert all(name in message for name in REGISTRY)
    _refused("Did you mean 'coinrun/interpreting-rl-behavior'", "coinrun/interpreting-rl")
    src = TrainProcgenRef().save(tmp_path / "model_1.pth")
    assert "--" not in _refused("does not say which game.*pass game=$", src)
    assert "allow" not in _refused(
        "trained in game bigfish.*drop game=$", TorchbeastRef().save(tmp_path / "model.tar"), game="starpilot"
    )
    _refused("unknown checkpoint format", src, game="coinrun", format="tf1")
    (tmp_path / "empty.pth").write_bytes(b"")
    _refused("is empty", tmp_path / "empty.pth", game="coinrun")
    with pytest.raises(ProclabError, match="invalid device 'tpu'"):
        load(src, "tpu", game="coinrun")
