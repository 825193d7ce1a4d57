"""``proclab trex demo-video DEMO_ID``: a demo as an mp4, with its actions, rewards and return drawn on.

The seed wrote 64x64 frames with OpenCV, each repeated 6 times at 40 fps. Here frames are
upscaled (nearest neighbour) and captioned with the step, the reward and the return so far,
and, given ``--reward-model``, the learned reward of each frame beside the true one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro

from proclab.errors import ProclabError
from proclab.io.arguments import DATA, REWARD_MODEL
from proclab.io.video import write_video
from proclab.reward.demo_reader import demo_table, open_store, read_demos
from proclab.reward.nets import load_reward_model, predict_rewards
from proclab.run.runtime import RuntimeConfig


@dataclass(frozen=True)
class DemoVideoArgs(RuntimeConfig):
    """Write one T-REX demo as an mp4 with action arrows and reward captions."""

    demo_id: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="DEMO_ID")]
    """Demo id, e.g. 1_203_931_872 (see 'proclab data info' or the demo store's episodes)."""
    data: Annotated[Path, DATA] = Path("demos")
    """Demo store written by 'proclab trex demos'."""
    game: str | None = None
    """Game of the demo (needed only if the store holds several games)."""
    reward_model: Annotated[Path | None, REWARD_MODEL] = None
    """Also caption each frame with the reward of this reward model (a 'proclab trex train' run or checkpoint
    directory), computed with the runtime flags."""
    out: Path | None = None
    """Output mp4 (default: demo_<ID>.mp4)."""
    fps: float = 15
    """Frames per second."""
    scale: int = 6
    """Upscaling of the 64x64 frames."""


def main(argv: list[str], prog: str = "proclab trex demo-video") -> None:
    args = tyro.cli(DemoVideoArgs, args=argv, prog=prog)
    store = open_store(args.data)
    game, table = demo_table(store, args.game)
    match = np.flatnonzero(table["demo_id"] == args.demo_id)
    if len(match) == 0:
        raise ProclabError(
            f"no {game} demo {args.demo_id!r} in {str(args.data)!r} (ids look like 0_203_931_872)"
        )
    row = table["index"][match[0]]
    demo = read_demos(store, [row])
    actions = store.read(int(row), ["action"])["action"]
    learned = None
    if args.reward_model is not None:
        rt = args.runtime()
        learned = predict_rewards(rt.prepare(load_reward_model(args.reward_model)[0]), demo.frames, rt)
    returns = np.cumsum(demo.rewards)
    captions = [
        [f"t={t}  r={demo.rewards[t]:g}  R={returns[t]:g}"]
        + ([f"learned r={learned[t]:.3f}"] if learned is not None else [])
        for t in range(len(demo.rewards))
    ]
    out = args.out or Path(f"demo_{args.demo_id}.mp4")
    write_video(out, demo.frames, fps=args.fps, scale=args.scale, actions=actions, captions=captions)
    print(f"{game} demo {args.demo_id}: {len(actions)} steps, return {demo.returns[0]:g}")
    print(f"video: {out}")
