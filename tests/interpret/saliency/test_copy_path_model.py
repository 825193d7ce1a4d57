"""The saliency and generative-visualisation tests again, unchanged, on a world model with the ``cpu``
preset's forms (copy path, camera shift, changed-pixel loss): the analyses on dreams must run on it."""

import importlib.util
from pathlib import Path

import pytest

from proclab.worldmodel.config import wm_size


def _tests_of(name: str):
    spec = importlib.util.spec_from_file_location(f"copy_path_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_saliency, _visualize = _tests_of("test_saliency"), _tests_of("test_visualize")
basis = _saliency.basis
for _module in (_saliency, _visualize):
    for _name in dir(_module):
        if _name.startswith("test_") and not _name.startswith("test_real") and _name != "test_target_grammar":
            globals()[_name] = getattr(_module, _name)


@pytest.fixture(scope="module")
def wm_forms() -> str:
    return "cpu"


def test_the_model_has_the_cpu_presets_forms(model):
    wm, _ = model
    assert wm.config.decoder_copy and (wm.shift is not None or wm.motion is not None)
    assert wm.config.camera_motion == wm_size("cpu").model.camera_motion
