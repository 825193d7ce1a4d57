"""The procgen backend: the one this Python installs, and procgen-gym's option types (3.13 only)."""

import importlib.util
import subprocess
import sys
from importlib.metadata import version

import pytest

from proclab.envs import _procgen

GYM3 = importlib.util.find_spec("procgen") is not None


def test_backend_is_the_installed_build():
    """procgen (procgen2 / procgen-mirror) wins where it is installed; procgen-gym otherwise."""
    if GYM3:
        wheel = "procgen2" if sys.version_info < (3, 12) else "procgen-mirror"
        expected = f"{wheel} {version(wheel)} (gym3)"
    else:
        expected = f"procgen-gym {version('procgen-gym')} (gymnasium)"
    installed = _procgen.NAME
    assert installed == expected


# procgen-gym ends the process (``fatal: invalid dtype``) for an int flag and raises for numpy scalars,
# so the check runs in a child; the child compares against options typed as procgen-gym wants them.
CHILD = """
import numpy as np
from procgen_gym import ProcgenVecEnv
from proclab.envs._procgen import ProcgenBackend

typed = dict(rand_seed=np.int64(3), num_levels=np.int32(5), start_level=1, use_backgrounds=np.bool_(False),
             center_agent=1, paint_vel_info=0, num_threads=np.int64(0), distribution_mode="easy")
ours = ProcgenBackend(num=2, game="maze", **typed)
plain = ProcgenVecEnv(num_envs=2, env_name="maze", rand_seed=3, num_levels=5, start_level=1,
                      use_backgrounds=False, center_agent=True, paint_vel_info=False, num_threads=0,
                      distribution_mode="easy")
rng = np.random.default_rng(0)
for _ in range(50):
    a = rng.integers(0, 15, 2).astype(np.int32)
    ours.act(a)
    rgb, rew, first, info = ours.observe()
    obs, rew2, term, _, info2 = plain.step(a)
    assert (rgb == obs).all() and (rew == rew2).all() and (first == term).all()
    assert (info["level_seed"] == info2["level_seed"]).all()
assert first.dtype == bool
print("same")
"""


@pytest.mark.skipif(
    GYM3 or importlib.util.find_spec("procgen_gym") is None, reason="procgen-gym backend only"
)
def test_procgen_gym_options_of_any_int_or_bool_type_play_like_plain_ones():
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "same"
