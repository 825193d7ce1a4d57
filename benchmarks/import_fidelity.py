"""Does ``proclab import`` of a real train-procgen-pytorch checkpoint play as its source did?

Two measurements of the same agent on the same level distribution, with sampled actions:

* **reference**: the source's network written here with plain ``torch.nn`` layers under the
  source's own tensor names (``embedder.block1.conv`` ...; the file loads into it with
  ``load_state_dict`` and no renaming), driven by a loop over raw procgen (``ProcgenGym3Env``,
  HWC frames transposed and divided by 255, the GRU state multiplied by ``1 - first``);
* **proclab**: ``proclab import`` of the file, then ``proclab eval`` of the run directory.

Each plays ``--episodes`` episodes (a fixed quota per environment slot, so short episodes are
not over-sampled). Prints one JSON line: both mean returns with 95 % confidence intervals, the
difference with its interval, and whether proclab's mean lies inside the reference's interval.

The interpreting-rl-behavior CoinRun agent is public in that project's model repository::

    git clone https://github.com/interpreting-rl-behavior/models--interpreting-rl-behavior m
    git -C m show aac1b1d:model_78053376.pth > model_78053376.pth
    python benchmarks/import_fidelity.py --checkpoint model_78053376.pth
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from proclab.envs._backend_gym3 import ProcgenGym3Env  # raw procgen through gym3 (Python 3.11, 3.12)


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return x + self.conv2(torch.relu(self.conv1(torch.relu(x))))


class Block(nn.Module):
    def __init__(self, c_in, c):
        super().__init__()
        self.conv, self.res1, self.res2 = nn.Conv2d(c_in, c, 3, padding=1), Residual(c), Residual(c)

    def forward(self, x):
        return self.res2(self.res1(nn.functional.max_pool2d(self.conv(x), 3, 2, 1)))


class Embedder(nn.Module):
    def __init__(self, widths, fc):
        super().__init__()
        self.block1, self.block2, self.block3 = (
            Block(3, widths[0]),
            Block(widths[0], widths[1]),
            Block(*widths[1:]),
        )
        self.fc = nn.Linear(widths[2] * 8 * 8, fc)

    def forward(self, x):
        x = torch.relu(self.block3(self.block2(self.block1(x))))
        return torch.relu(self.fc(x.flatten(1)))


class GRUWrapper(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.gru = nn.GRU(size, size)


class SourcePolicy(nn.Module):
    """train-procgen-pytorch's CategoricalPolicy(ImpalaModel, GRU), named as the source names it."""

    def __init__(self, state_dict):
        super().__init__()
        widths = tuple(state_dict[f"embedder.block{i}.conv.weight"].shape[0] for i in (1, 2, 3))
        fc = state_dict["embedder.fc.weight"].shape[0]
        self.embedder = Embedder(widths, fc)
        self.gru = GRUWrapper(fc)
        self.fc_policy, self.fc_value = nn.Linear(fc, 15), nn.Linear(fc, 1)
        self.load_state_dict({k: v for k, v in state_dict.items() if k != "init_hx"})

    @torch.no_grad()
    def forward(self, rgb_hwc: np.ndarray, hx: torch.Tensor, first: np.ndarray):
        x = torch.from_numpy(rgb_hwc).permute(0, 3, 1, 2).float() / 255.0
        hx = hx * torch.from_numpy(1.0 - first.astype(np.float32)).unsqueeze(1)
        out, hx = self.gru.gru(self.embedder(x).unsqueeze(0), hx.unsqueeze(0))
        return self.fc_policy(out[0]), hx[0]


def reference_returns(path: Path, episodes: int, envs: int, seed: int, game: str, mode: str) -> np.ndarray:
    payload = torch.load(path, map_location="cpu", weights_only=True)
    policy = SourcePolicy(payload.get("model_state_dict", payload)).eval()
    env = ProcgenGym3Env(
        num=envs,
        env_name=game,
        distribution_mode=mode,
        num_levels=0,
        start_level=0,
        use_backgrounds=False,
        rand_seed=seed,
    )
    quota = np.full(envs, episodes // envs) + (np.arange(envs) < episodes % envs)
    done_count, running, returns = np.zeros(envs, int), np.zeros(envs), []
    hx = torch.zeros(envs, policy.fc_value.in_features)
    gen = torch.Generator().manual_seed(seed)
    _, obs, first = env.observe()
    while (done_count < quota).any():
        logits, hx = policy(obs["rgb"], hx, first)
        action = torch.multinomial(torch.softmax(logits, 1), 1, generator=gen)[:, 0].numpy()
        env.act(action.astype(np.int32))
        reward, obs, first = env.observe()
        running += reward
        for i in np.flatnonzero(first):
            if done_count[i] < quota[i]:
                returns.append(running[i])
                done_count[i] += 1
            running[i] = 0.0
    env.close()
    return np.asarray(returns)


def proclab_row(path: Path, episodes: int, seed: int, workdir: Path) -> dict:
    """``proclab import`` then ``proclab eval --split all``: eval's row of results."""
    run, table = workdir / "run", workdir / "eval.json"
    cmd = [sys.executable, "-m", "proclab"]
    subprocess.run([*cmd, "import", str(path), "--out", str(run)], check=True, capture_output=True)
    subprocess.run(
        [
            *cmd,
            "eval",
            "--agent",
            str(run),
            "--split",
            "all",
            "--episodes",
            str(episodes),
            "--seed",
            str(seed),
            "--out",
            str(table),
        ],
        check=True,
        capture_output=True,
    )
    return json.loads(table.read_text())["rows"][0]


def interval(mean: float, sem: float) -> list[float]:
    return [mean - 1.96 * sem, mean + 1.96 * sem]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="the train-procgen-pytorch .pth file")
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--game", default="coinrun")
    parser.add_argument("--mode", default="hard")
    args = parser.parse_args()
    start = time.perf_counter()
    ref = reference_returns(args.checkpoint, args.episodes, args.envs, args.seed + 1, args.game, args.mode)
    ref_wall = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        row = proclab_row(args.checkpoint, args.episodes, args.seed, Path(tmp))
        proclab_wall = time.perf_counter() - start
    ref_mean, ref_sem = float(ref.mean()), float(ref.std(ddof=1) / np.sqrt(ref.size))
    diff = row["return_mean"] - ref_mean
    diff_sem = float(np.hypot(ref_sem, row["return_sem"]))
    print(
        json.dumps(
            {
                "benchmark": "import_fidelity",
                "checkpoint": args.checkpoint.name,
                "game": args.game,
                "mode": args.mode,
                "levels": "all",
                "actions": "sampled",
                "reference": {
                    "episodes": int(ref.size),
                    "return_mean": ref_mean,
                    "ci95": interval(ref_mean, ref_sem),
                    "wall_s": round(ref_wall, 1),
                },
                "proclab": {
                    "episodes": row["episodes"],
                    "return_mean": row["return_mean"],
                    "ci95": interval(row["return_mean"], row["return_sem"]),
                    "level_complete_rate": row["level_complete_rate"],
                    "wall_s": round(proclab_wall, 1),
                },
                "difference": {"mean": diff, "ci95": interval(diff, diff_sem)},
                "proclab_mean_inside_reference_ci": bool(abs(diff) <= 1.96 * ref_sem),
            }
        )
    )


if __name__ == "__main__":
    main()
