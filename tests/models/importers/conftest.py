"""Foreign agents for the import tests: one reference per format variant, saved as its source saves it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from foreign_agents import VARIANTS, game_of
from proclab.models.importers.command import ImportArgs, import_agent
from proclab.models.loading import load_agent
from proclab.run.runtime import Runtime

CPU = Runtime(device=torch.device("cpu"), bf16=False, channels_last=False)


@pytest.fixture
def imported(tmp_path: Path):
    """``imported(variant) -> (reference, proclab agent, run directory)``: saved, imported, loaded."""

    def make(variant: str):
        factory, filename, _ = VARIANTS[variant]
        ref = factory()
        path = ref.save(tmp_path / filename)
        run, _ = import_agent(ImportArgs(source=path, game=game_of(ref), out=tmp_path / f"run-{variant}"))
        agent, _, _ = load_agent(run, CPU)
        return ref, agent, run

    return make
