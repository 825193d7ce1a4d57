"""What an intervention edits: the agent (its checkpoint), the state tensor the folder's basis
describes, and the recorded distribution of its coordinates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.bases.activations import HOOK
from proclab.interpret.bases.coordinates import Coordinates, encode_all
from proclab.interpret.interventions.arms import Recorded
from proclab.interpret.saliency.world_model import basis_hook
from proclab.interpret.workspace.folder import Workspace
from proclab.store import EpisodeStore
from proclab.store.state_codec import StateCodec

HIDDEN = Path("hidden") / "hidden.npz"


def agent_checkpoint(ws: Workspace, given: Path | None, command: str) -> Path:
    """``given``, else the folder's agent checkpoint, else the one that recorded its data; ``command`` (e.g.
    ``analyze steer``) names who needs it when none is known."""
    data = ws.inputs.get("data")
    found = ws.agent_checkpoint(given, EpisodeStore(data) if data else None)
    if found is None:
        raise ProclabError(f"{command} needs the agent: pass --agent AGENT")
    return found


def state_key(ws: Workspace, agent, given: str | None) -> str:
    """What the folder's basis describes: a state tensor (``--state`` must name it), or ``hook:NAME`` for
    a basis fitted on another hook point (a feed-forward agent's ``torso.hook_fc``, a conv map)."""
    codec = StateCodec(agent.state_shapes())
    source = ws.activation()
    hook = basis_hook(source, codec)
    keys = [k for k, h in codec.hook_names().items() if h == hook]
    if not keys:
        if given is not None:
            raise ProclabError(f"--state {given}: the folder's basis was fitted on {source!r}, not a state")
        return HOOK + hook
    if given is not None and given != keys[0]:
        if given not in codec.hook_names():
            raise unknown_choice("state tensor", given, codec.hook_names())
        raise ProclabError(
            f"--state {given}: the folder's basis was fitted on {keys[0]}; fit a basis on "
            f"state_out/{given} in another folder to intervene there"
        )
    return keys[0]


def recorded(ws: Workspace, coords: Coordinates, agent, key: str) -> Recorded:
    """The coordinates of every state ``analyze hidden`` analysed in this folder (where edits are placed),
    and those of the agent's start state (where increment-collapse holds a coordinate). ICA and PCA
    coordinates are read as analysed; other systems encode the states, rebuilt exactly from all their PCs."""
    path = ws.path / HIDDEN
    if not path.is_file():
        raise ProclabError(
            f"analysis folder {str(ws.path)!r} has no {HIDDEN}; run `proclab analyze hidden` first "
            "(edits are placed in the recorded distribution of their coordinate)"
        )
    with np.load(path) as f:
        if coords.name == "ica":
            values = f["ics"]
        elif coords.name == "pca":
            values = f["pcs"][:, : coords.k]
        else:
            values = encode_all(coords, ws.basis().from_pcs(f["pcs"].astype(np.float64)))
    if values.shape[1] != coords.k:
        raise ProclabError(
            f"{str(path)!r} holds {values.shape[1]} {coords.name} coordinates, the basis {coords.k}; "
            "rerun analyze hidden"
        )
    if key.startswith(HOOK):  # no start state at a hook: collapse holds the coordinate of zero activation
        start = torch.zeros(1, coords.dim, dtype=torch.float64)
    else:
        start = agent.initial_state(1)[key].reshape(1, -1).double().cpu()
    return Recorded(values, coords.encode(start)[0].numpy())
