"""Trained networks put to use: an agent from any source, and freezing a network for analysis.

Everything downstream of training (evaluation, rendering, recording, the world model, T-REX
demos, interpretation) loads agents here, so a checkpoint is read and checked the same way
everywhere. :func:`load` is the one call of a notebook: a proclab run or checkpoint, a checkpoint
another code base wrote (converted in memory as ``proclab import`` converts it), or the name of a
published agent (downloaded once into proclab's cache); :func:`load_agent` is the commands' way to
a proclab checkpoint, with the checkpoint itself beside the agent.
"""

from __future__ import annotations

from pathlib import Path

from proclab.envs import EnvConfig, parse_split
from proclab.errors import ProclabError, unknown_choice
from proclab.io.checkpoint import META, Checkpoint, load_checkpoint, load_weights_into
from proclab.io.configs import from_dict
from proclab.models.agent import Agent, build_agent
from proclab.models.bundled import source_path
from proclab.models.config import AgentConfig
from proclab.models.importers.published import REGISTRY, fetch
from proclab.models.importers.setting import Asked, convert
from proclab.run.runtime import ModuleT, Runtime, make_runtime


def freeze(module: ModuleT) -> ModuleT:
    """Eval mode and ``requires_grad=False`` on every weight; activations stay differentiable."""
    for p in module.parameters():
        p.requires_grad_(False)
    return module.eval()


def load(
    source: str | Path,
    device: str = "auto",
    precision: str = "fp32",
    *,
    game: str | None = None,
    mode: str | None = None,
    split: str | None = None,
    backgrounds: bool | None = None,
    format: str = "auto",
    cache_dir: str | Path | None = None,
) -> Agent:
    """The agent ``source`` names, frozen, on ``device``, with ``agent.env_config`` (what it plays),
    ``agent.runtime`` and ``agent.source`` set.

    ``source`` is, in this order: the name of an agent shipped with proclab (``"coinrun/small"``,
    ``"maze/small"``: :mod:`proclab.models.bundled`); a proclab run directory or checkpoint directory (its
    latest checkpoint); any other file, or a directory holding one, read as ``proclab import`` reads it
    (same formats, same facts, same refusals) but kept in memory, nothing written; or the name of a
    published agent (``proclab.models.importers.published.REGISTRY``), downloaded on first use into
    ``cache_dir/NAME/`` (default: ``agents/`` in proclab's cache, ``$PROCLAB_CACHE`` or
    ``$XDG_CACHE_HOME/proclab``) and checked by its SHA-256. ``game``, ``mode``, ``split`` and
    ``backgrounds`` say what a foreign agent was trained on where its file does not (as ``proclab
    import``'s flags do); ``format`` forces a checkpoint format instead of recognising it.

    ``precision`` is fp32 unless asked: the agent's activations are read as it computes them (bf16 autocast
    moves a GRU state by up to 6e-2 and logits by 0.15 against an fp32 forward pass); ``"bf16"`` or
    ``"auto"`` (bf16 where the hardware runs it natively) trade that for speed.
    """
    runtime = make_runtime(device, precision)
    path = source_path(source)
    asked = Asked(game, mode, split, backgrounds, by="load")
    if (path / META).is_file() or (path / "checkpoints").is_dir():
        agent = _own(load_checkpoint(path, kind="agent"), runtime, str(source))
        assert agent.env_config is not None  # _placed sets it
        _check_plays(agent.env_config, asked, str(source))
        return agent
    if not path.exists():
        if str(source) not in REGISTRY:
            raise unknown_choice(
                "agent (no file or directory of that name, nor a published agent)", str(source), REGISTRY
            )
        path = fetch(REGISTRY[str(source)], cache_dir)
    conversion = convert(path, format, asked)
    return _placed(conversion.agent(), conversion.setting.env, runtime, str(source))


def load_agent(path: str | Path | Checkpoint, runtime: Runtime) -> tuple[Agent, EnvConfig, Checkpoint]:
    """The agent of a checkpoint (or of a run directory's latest one, or of one already loaded), frozen,
    on the runtime's device."""
    ckpt = path if isinstance(path, Checkpoint) else load_checkpoint(path, kind="agent")
    agent = _own(ckpt, runtime, str(ckpt.path if isinstance(path, Checkpoint) else path))
    assert agent.env_config is not None  # _placed sets it
    return agent, agent.env_config, ckpt


def _check_plays(env: EnvConfig, asked: Asked, source: str) -> None:
    """Refuse a game, mode, split or backgrounds that a proclab run's own record contradicts."""

    def levels(split: str) -> tuple[int, int]:
        found = parse_split(split)
        return found.start, found.num

    for name, given, own, agrees in (
        ("game", asked.game, ", ".join(env.game), lambda game: game in env.game),
        ("mode", asked.mode, env.mode, lambda mode: mode == env.mode),
        ("split", asked.split, env.split, lambda split: levels(split) == levels(env.split)),
        (
            "backgrounds",
            asked.backgrounds,
            env.use_backgrounds,
            lambda backgrounds: backgrounds == env.use_backgrounds,
        ),
    ):
        if given is not None and not agrees(given):
            raise ProclabError(f"the agent in {source!r} plays {name} {own}, not {given}; drop {name}=")


def _own(ckpt: Checkpoint, runtime: Runtime, source: str) -> Agent:
    agent = build_agent(from_dict(AgentConfig, ckpt.meta["agent"]))
    load_weights_into(agent, ckpt.weights, ckpt.path)
    return _placed(agent, from_dict(EnvConfig, ckpt.meta["env"]), runtime, source)


def _placed(agent: Agent, env: EnvConfig, runtime: Runtime, source: str) -> Agent:
    """``agent`` frozen on the runtime's device, carrying what the layers above it need to play it."""
    agent = freeze(runtime.prepare(agent))
    agent.env_config, agent.runtime, agent.source = env, runtime, source
    return agent
