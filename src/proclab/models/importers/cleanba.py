"""CleanRL's JAX (Cleanba) Procgen agents: ``cleanba_ppo_envpool_procgen`` ``.cleanrl_model`` files.

The file is ``flax.serialization.to_bytes([vars(args), [network_params, actor_params,
critic_params]])``, read by :mod:`.flax_msgpack` into ``{"0": args, "1": {"0": network, "1":
actor, "2": critic}}``, each parameter tree under ``"params"``. The network (Flax, NHWC):

* observations arrive NCHW uint8 from envpool and are transposed to NHWC and divided by 255;
* ``ConvSequence_<i>`` (channels 16/32/32): ``Conv_0`` 3x3 ``SAME``, max-pool 3/2 with ``SAME``
  padding (one pixel *after* the image on even sizes, where PyTorch code pads both sides), then
  ``ResidualBlock_0`` / ``_1`` (``x + Conv_1(relu(Conv_0(relu(x))))``);
* ReLU, flatten *in NHWC order*, ``Dense_0`` (-> 256), ReLU; ``actor``/``critic`` ``Dense_0``.

Flax stores convolution kernels ``(kh, kw, in, out)`` and dense kernels ``(in, out)``: the
import transposes them to PyTorch's layout and reorders the first dense kernel's rows from the
NHWC flatten to the NCHW one. The pooling becomes proclab's ``pool="same"``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
from torch import Tensor

from proclab.envs.games import GAMES, MODES
from proclab.models.config import AgentConfig
from proclab.models.importers.base import Format, ImportedAgent, SourceFacts, SourceTensors
from proclab.models.importers.layers import ImpalaNames, take_heads, take_impala_torso
from proclab.models.importers.source import SourceFile

PARTS = ("network", "actor", "critic")


def _hwio_to_oihw(kernel: Tensor) -> Tensor:
    return kernel.permute(3, 2, 0, 1)


def _nhwc_dense_to_nchw(kernel: Tensor, chw: tuple[int, int, int]) -> Tensor:
    """``(H*W*C, out)`` over an NHWC flatten -> PyTorch's ``(out, C*H*W)`` over an NCHW flatten."""
    c, h, w = chw
    if kernel.dim() != 2 or kernel.shape[0] != c * h * w:
        return kernel.T  # the shape check after the transform names the mismatch
    return kernel.reshape(h, w, c, -1).permute(3, 2, 0, 1).reshape(-1, c * h * w)


NAMES = ImpalaNames(
    conv=lambda i: f"network.ConvSequence_{i}.Conv_0",
    res=lambda i, j, k: f"network.ConvSequence_{i}.ResidualBlock_{j}.Conv_{k}",
    fc="network.Dense_0",
    weight="kernel",
    kernel=_hwio_to_oihw,
    dense=_nhwc_dense_to_nchw,
)


def _flatten(tree: Mapping, prefix: str) -> dict[str, np.ndarray]:
    out = {}
    for key, value in tree.items():
        name = f"{prefix}.{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name))
        elif isinstance(value, np.ndarray):
            out[name] = value
    return out


def _parts(payload) -> tuple[Mapping, list[Mapping]] | None:
    """``(args, [network, actor, critic])`` parameter trees, or ``None`` if this is not the format."""
    if not isinstance(payload, Mapping) or set(payload) != {"0", "1"}:
        return None
    args, params = payload["0"], payload["1"]
    if not isinstance(params, Mapping) or set(params) != {"0", "1", "2"}:
        return None
    trees = [params[str(i)].get("params") if isinstance(params[str(i)], Mapping) else None for i in range(3)]
    if not all(isinstance(t, Mapping) for t in trees) or "ConvSequence_0" not in trees[0]:
        return None
    return (args if isinstance(args, Mapping) else {}), trees


def detect(source: SourceFile) -> bool:
    return source.container == "msgpack" and _parts(source.payload) is not None


def game_of(env_id: str) -> tuple[str | None, str | None]:
    """``("bigfish", "hard")`` from an envpool Procgen id such as ``BigfishHard-v0``."""
    name = re.sub(r"-v\d+$", "", env_id).lower()
    for game in sorted(GAMES, key=len, reverse=True):
        if name.startswith(game):
            rest = name[len(game) :]
            return game, (rest if rest in MODES else None)
    return None, None


def convert(source: SourceFile) -> ImportedAgent:
    args, trees = _parts(source.payload)  # detect() has accepted the payload
    tensors = {}
    for part, tree in zip(PARTS, trees, strict=True):
        tensors.update(_flatten(tree, part))
    src = SourceTensors(tensors, str(source.path))
    widths, fc, weights = take_impala_torso(src, NAMES)
    actions, heads = take_heads(src, "actor.Dense_0", "critic.Dense_0", fc, transpose=True)
    weights.update(heads)
    src.finish()
    config = AgentConfig(core="none", widths=widths, fc=fc, num_actions=actions, pool="same")
    game, mode = game_of(str(args.get("env_id", "")))
    steps = args.get("total_timesteps")
    facts = SourceFacts(
        step=int(steps) if isinstance(steps, int | np.integer) else None,
        step_from="args.total_timesteps (the file is written when training ends)"
        if steps is not None
        else None,
        game=game,
        mode=mode,
        said_by=f"args.env_id {args.get('env_id')!r}" if game else None,
    )
    conventions = {
        "observations": "RGB 64x64 uint8, NCHW transposed to NHWC and divided by 255 inside the network",
        "actions": "Procgen's 15 button combinations, in Procgen's order",
        "state": "no state",
        "previous_reward": "not an input",
        "pooling": "max-pool 3/2 with XLA SAME padding (after the image): AgentConfig.pool = same",
    }
    return ImportedAgent("Cleanba (Flax)", config, weights, facts, conventions)


FORMAT = Format("cleanba", "CleanRL JAX / Cleanba Procgen (Flax msgpack)", detect, convert)
