"""Helpers shared by the tests of several packages: the CLI in a subprocess, tiny agents, checkpoints,
rollouts, recorded stores, sample stores, world-model configs, the headless Chromium of the
browser tests, and the user's matplotlib after proclab drew."""

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from proclab.envs import EnvConfig, ProcgenVecEnv
from proclab.interpret.interventions.direction_edits import edit_hook
from proclab.interpret.sweep.plan import SweepPlan
from proclab.models import AgentConfig, build_agent
from proclab.models.cache import ActivationCache
from proclab.models.edited import Intervened
from proclab.models.interventions import Coordinates, Intervention, edit_coordinates
from proclab.record import RecordSettings, new_recording, record_shard
from proclab.rl.agent_checkpoints import save_agent_checkpoint
from proclab.rl.config import PPOConfig, TrainConfig
from proclab.rl.ppo import PPOLearner
from proclab.rl.rollout import Actor, Rollout
from proclab.run.runtime import RuntimeConfig
from proclab.store import ShardWriter
from proclab.store.schema import STATE_LAYOUT_ATTR
from proclab.worldmodel.config import WMTrainConfig, wm_size

TINY_AGENT = dict(widths=(4, 8, 8), fc=32)
TINY_FLAGS = ["--widths", "4", "8", "8", "--fc", "32", "--torch-threads", "1"]
TINY_PPO = [
    "--preset",
    "tiny",
    "--game",
    "dodgeball",
    "--num-envs",
    "4",
    "--num-steps",
    "32",
    "--num-minibatches",
    "2",
]
"""A PPO run of a few seconds: the tiny preset on 4 envs x 32 steps (add --val-num-envs, TINY_FLAGS, ...)."""


def with_game(args: list[str], *games: str) -> list[str]:
    """``args`` with its ``--game`` list replaced by ``games`` (a command refuses --game given twice)."""
    at = args.index("--game")
    end = next((i for i in range(at + 1, len(args)) if args[i].startswith("--")), len(args))
    return [*args[:at], "--game", *games, *args[end:]]


TINY_GRU = AgentConfig(core="gru", rnn_size=16, head_init="torch", **TINY_AGENT)


CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    """Debian's chromium (or ``PROCLAB_CHROMIUM``); the browser tests fail with the install line without it."""
    import pytest

    path = os.environ.get("PROCLAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).is_file():
        pytest.fail(
            "the browser tests need Debian's chromium: apt-get install -y chromium (or set PROCLAB_CHROMIUM)"
        )
    return path


def torchrun_proclab(*args: str, processes: int = 2) -> subprocess.CompletedProcess:
    """``proclab ARGS`` as ``processes`` torchrun ranks on this machine (output captured, 300 s at most).

    One job in many aborted on CI (Python 3.13) with "terminate called without an active exception" from a
    rank's native code and was not reproduced in 80 runs here; a job that ends that way is run once more, so
    that the test fails on a second abort (or on anything else) rather than on one. The retry starts from an
    empty ``--run-root`` (ARGS must give one), so the test reads only the run that exited cleanly.
    """
    run_root = Path(args[args.index("--run-root") + 1])
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(processes),
    ]

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([*command, "-m", "proclab", *args], capture_output=True, text=True, timeout=300)

    proc = run()
    if proc.returncode != 0 and "terminate called without an active exception" in proc.stderr:
        shutil.rmtree(run_root, ignore_errors=True)
        proc = run()
    return proc


def proclab(*args: str, **kw) -> subprocess.CompletedProcess:
    """``proclab ARGS`` in a fresh interpreter (exit status and output captured)."""
    return subprocess.run([sys.executable, "-m", "proclab", *args], capture_output=True, text=True, **kw)


def matplotlib_after(code: str, out: Path) -> dict:
    """Run ``code`` (``OUT`` is ``out``, a folder it may write in) in a new interpreter whose user chose the svg
    backend first: the backend afterwards, and whether pyplot was imported (a new interpreter, because
    this one may have imported pyplot for other tests)."""
    script = "\n".join([
        "import json, sys",
        "from pathlib import Path",
        "import matplotlib",
        "matplotlib.use('svg')",
        f"OUT = Path({str(out)!r})",
        textwrap.dedent(code),
        "print(json.dumps({'backend': matplotlib.get_backend(), 'pyplot': 'matplotlib.pyplot' in sys.modules}))",
    ])  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def round_trip(result, folder: Path, unsaved: tuple[str, ...] = ()):
    """``result`` saved in ``folder`` and loaded back as its type: asserted equal field by field (arrays and
    tensors bitwise, with their dtypes; NaN equal to NaN), but for the fields ``unsaved`` names (a live agent);
    returns the loaded result."""
    loaded = type(result).load(result.save(folder))
    assert type(loaded) is type(result)
    for f in dataclasses.fields(result):
        if f.name not in unsaved:
            assert_same(getattr(loaded, f.name), getattr(result, f.name), f.name)
    return loaded


def assert_same(got, want, where: str = "") -> None:
    """``got`` equals ``want`` all the way down (:func:`round_trip`)."""
    if isinstance(want, ActivationCache):
        assert list(got) == list(want), where
        for a, b, what in ((got.mask, want.mask, "mask"), (got.levels, want.levels, "levels")):
            assert_same(a, b, f"{where}.{what}")
        for name in want:
            assert_same(got.packed(name).values, want.packed(name).values, f"{where}[{name}]")
    elif isinstance(want, torch.Tensor | np.ndarray):
        assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape, where
        as_numpy = lambda x: x.numpy() if isinstance(x, torch.Tensor) else x  # noqa: E731
        assert as_numpy(got).tobytes() == as_numpy(want).tobytes(), where
    elif hasattr(want, "__dict__") and not isinstance(want, type):  # a dataclass, a basis, a fitted model
        assert type(got) is type(want), where
        assert_same(vars(got), vars(want), where)
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k, v in want.items():
            assert_same(got[k], v, f"{where}.{k}")
    elif isinstance(want, list | tuple):
        assert type(got) is type(want) and len(got) == len(want), f"{where}: {type(got)} != {type(want)}"
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same(a, b, f"{where}.{i}")
    elif isinstance(want, float | np.floating) and np.isnan(want):
        assert isinstance(got, float | np.floating) and np.isnan(got), f"{where}: {got!r} != nan"
    else:
        assert got == want and isinstance(got, bool | np.bool_) == isinstance(want, bool | np.bool_), (
            f"{where}: {got!r} != {want!r}"
        )


def ray_tasks(cluster, name: str, seen: set | None = None) -> list:
    """Every attempt of a Ray task named ``name`` (its function's name) that ``cluster`` (a ``LocalCluster``) has
    seen (Ray's state API, through its dashboard), but those of the tasks ``seen``."""
    from ray.util.state import list_tasks

    attempts = list_tasks(address=cluster.dashboard_url, filters=[("name", "=", name)], limit=1000)
    return [t for t in attempts if t.task_id not in (seen or set())]


@contextlib.contextmanager
def ray_tasks_run(cluster, name: str, count: int, nodes: int | None = None):
    """Check that the block runs ``count`` Ray tasks named ``name`` on ``cluster``, each once, to the end (and on
    ``nodes`` nodes of it)."""
    before = {t.task_id for t in ray_tasks(cluster, name)}
    yield
    ran = ray_tasks(cluster, name, before)
    assert len(ran) == count and {t.state for t in ran} == {"FINISHED"}, ran
    assert nodes is None or len({t.node_id for t in ran}) == nodes, ran


def agent_checkpoint(run_dir: Path, agent: AgentConfig, env: EnvConfig, state: dict | None = None) -> Path:
    """A freshly initialised agent saved exactly as the trainers save theirs (seeded: same weights every time)."""
    torch.manual_seed(0)
    config = TrainConfig(env=env, agent=agent)
    return save_agent_checkpoint(run_dir, build_agent(agent), config, env.games(), 0, state)


def collected(
    core: str, runtime, num_envs=6, num_steps=24, seed=0, prev_reward=False, game="dodgeball", **ppo
):
    torch.manual_seed(seed)
    agent = runtime.prepare(
        build_agent(AgentConfig(core=core, rnn_size=16, prev_reward=prev_reward, **TINY_AGENT))
    )
    env = ProcgenVecEnv(EnvConfig(game=(game,), num_envs=num_envs), seed=seed)
    actor = Actor(env, agent, runtime)
    rollout = Rollout.allocate(num_steps, num_envs, runtime.device)
    actor.collect(rollout)  # twice, so the second rollout starts mid-episode with a carried state
    actor.collect(rollout)
    learner = PPOLearner(agent, PPOConfig(num_steps=num_steps, **ppo), runtime, total_updates=10)
    return agent, rollout, learner


def make_agent_checkpoint(path: Path, agent: AgentConfig = TINY_GRU, game: str = "coinrun") -> Path:
    """A trainer's checkpoint of a freshly initialised agent (by default the tiny GRU, on coinrun)."""
    return agent_checkpoint(path, agent, EnvConfig(game=(game,), num_envs=2, use_backgrounds=False))


def record(checkpoint: Path, out: Path, episodes: int = 2, seed: int = 0) -> Path:
    """``episodes`` episodes of the checkpoint's agent recorded by `proclab record`'s code into ``out``."""
    recording = new_recording(checkpoint, out, RecordSettings(episodes=episodes, num_envs=2, seed=seed))
    record_shard(
        recording, out, episodes, runtime=RuntimeConfig(device="cpu", precision="fp32", torch_threads=1)
    )
    return out


def tiny_config(store: Path, run_root: Path, **overrides) -> WMTrainConfig:
    """The tiny world-model training config on ``store``, CPU, one thread, no TensorBoard."""
    base = wm_size("tiny")
    return replace(
        base,
        data=store,
        run_root=run_root,
        device="cpu",
        precision="fp32",
        tensorboard=False,
        torch_threads=1,
        **overrides,
    )


def write_samples(
    path: Path,
    n: int = 40,
    steps: int = 10,
    width: int = 16,
    env: int = 24,
    seed: int = 0,
    inits: tuple[str, ...] = ("informed", "random"),
) -> Path:
    """A sample store shaped like proclab wm sample's output (GRU agent of ``width`` units): per step
    obs, action, value, reward, env_h and the agent state; per sample bottleneck, init and state_in0."""
    rng = np.random.default_rng(seed)
    layout = {"core.0": [["core.0.h", [width]]]}
    with ShardWriter(path, attrs={STATE_LAYOUT_ATTR: layout}, commit_seconds=0) as w:
        for i in range(n):
            init = inits[i % len(inits)]
            shift = 0.0 if init == "informed" else 1.5
            w.append(
                {
                    "obs": rng.integers(0, 255, (steps, 3, 64, 64), dtype=np.uint8),
                    "action": rng.integers(0, 15, steps),
                    "value": rng.normal(size=steps).astype(np.float32),
                    "reward": np.zeros(steps, np.float32),
                    "terminated": np.zeros(steps, bool),
                    "step": np.arange(steps, dtype=np.int32),
                    "env_h": (rng.normal(size=(steps, env)) + i % 3 * 4).astype(np.float32),
                    "state_out/core.0": np.tanh(rng.normal(size=(steps, width))).astype(np.float32),
                },
                {
                    "bottleneck": (rng.normal(size=12) + shift).astype(np.float32),
                    "init": init,
                    "game": "bossfight",
                    "state_in0/core.0": np.zeros(width, np.float32),
                },
            )
    return path


# -- full disks and kills ---------------------------------------------------------------------------
@contextlib.contextmanager
def tmpfs(path: Path, size: str = "32m"):
    """A small tmpfs mounted at ``path`` for the block (a real file system that fills up); the test
    is skipped where mounting is not allowed (it needs root)."""
    import pytest

    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip() or proc.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill_disk(path: Path, leave: int = 0) -> Path:
    """Fill the file system holding ``path`` until about ``leave`` bytes are free; returns the filler
    file (delete it to free the space again)."""
    filler = path / "filler.bin"
    st = os.statvfs(path)
    with contextlib.suppress(OSError), open(filler, "ab") as f:
        f.write(b"\0" * max(st.f_bavail * st.f_frsize - leave, 0))
    return filler


@contextlib.contextmanager
def disk_full(root: Path, after: int = 0, match: str = ""):
    """A simulated full disk: writes by this process to files below ``root`` whose path contains
    ``match`` fail with ``OSError(ENOSPC)`` once ``after`` bytes have been written to them (where a
    tmpfs cannot be mounted, and for writers inside one process)."""
    import builtins
    import errno
    import io

    real_open, budget, root = io.open, [after], Path(root).resolve()

    class Filling(io.FileIO):
        def write(self, data) -> int:
            size = memoryview(data).nbytes
            if size > budget[0]:
                budget[0] = 0
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            budget[0] -= size
            return super().write(data)

    def fake_open(
        file, mode="r", buffering=-1, encoding=None, errors=None, newline=None, closefd=True, opener=None
    ):
        target = Path(os.fsdecode(file)).resolve() if isinstance(file, str | bytes | os.PathLike) else None
        if (
            target is None
            or not any(c in mode for c in "wax+")
            or not target.is_relative_to(root)
            or match not in str(target)
        ):
            return real_open(file, mode, buffering, encoding, errors, newline, closefd, opener)
        raw = Filling(file, mode.replace("b", "").replace("t", ""))
        buffered = io.BufferedRandom(raw) if "+" in mode else io.BufferedWriter(raw)
        return buffered if "b" in mode else io.TextIOWrapper(buffered, encoding or "utf-8", errors, newline)

    builtins.open = io.open = fake_open
    try:
        yield
    finally:
        builtins.open = io.open = real_open


KILLER = """
import io, os, signal, sys
from pathlib import Path
root, count, real_open = Path(sys.argv[1]).resolve(), int(sys.argv[2]), io.open
opened = [0]
def killing_open(file, mode="r", *args, **kwargs):
    if isinstance(file, (str, bytes, os.PathLike)) and any(c in mode for c in "wax+"):
        if Path(os.fsdecode(file)).resolve().is_relative_to(root):
            opened[0] += 1
            if opened[0] == count:
                os.kill(os.getpid(), signal.SIGKILL)
    return real_open(file, mode, *args, **kwargs)
import builtins
builtins.open = io.open = killing_open
from proclab.cli import main
main(sys.argv[3:])
"""


def proclab_killed_at_write(root: Path, count: int, *args: str) -> subprocess.CompletedProcess:
    """``proclab ARGS`` in a fresh interpreter that kills itself with SIGKILL (kill -9: no cleanup of
    any kind) when it opens its ``count``-th file for writing below ``root``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", KILLER, str(root), str(count), *args], capture_output=True, text=True, env=env
    )


def benchmark(name: str):
    """The script ``benchmarks/NAME.py`` as a module (for the smoke tests that run its ``main`` at toy size)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def one_line_error(capsys, argv: list[str]) -> str:
    """``proclab ARGV`` in this process must fail with exit status 2 and one line on stderr, no traceback."""
    import pytest

    from proclab.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def proclab_killed_when(
    pattern: str, root: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess:
    """``proclab ARGS`` in a fresh interpreter, killed with SIGKILL as soon as ``root.glob(pattern)``
    finds something (e.g. a checkpoint): a crash at a moment the test chooses."""
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "proclab", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.time() + timeout
    while not list(root.glob(pattern)) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return proc


def hold(coords, h: torch.Tensor, dims: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """The sweep's hold on rows ``h`` ``(N, dim)``: coordinate ``dims[r]`` set to ``values[r]`` (``-1``: row kept)."""
    return edit_coordinates(coords, h, "set", dims, value=values)


def held_agent(agent, coords, key: str, dims, values) -> Intervened:
    """``agent`` holding coordinate ``dims[r]`` of ``key`` (a state tensor or ``hook:NAME``) at ``values[r]`` in
    row ``r`` at every step (0-d ``dims`` and ``values``: every row), through the one agent wrapper."""
    dims, values = torch.as_tensor(dims), torch.as_tensor(values)
    select = Coordinates(coords, dims)
    return Intervened(agent, [Intervention(edit_hook(key), select, "set", values, per_row=dims.dim() > 0)])


def hold_player(agent, coords, key: str, recorded=None, seed: int = 0) -> tuple[Intervened, SweepPlan]:
    """The sweep's player and plan for ``play``: rows hold, redraw (from ``recorded``) or swap coordinates."""
    rec = np.zeros((1, coords.k), np.float32) if recorded is None else recorded
    return Intervened(agent, seed=seed, count_steps=True), SweepPlan(coords, key, rec)
