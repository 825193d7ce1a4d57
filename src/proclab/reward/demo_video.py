"""A T-REX demo as an mp4, with its actions, rewards and return drawn on (``proclab trex demo-video``).

The seed wrote 64x64 frames with OpenCV, each repeated 6 times at 40 fps. Here frames are
upscaled (nearest neighbour) and captioned with the step, the reward and the return so far,
and, given ``--reward-model``, the learned reward of each frame beside the true one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from proclab.errors import ProclabError
from proclab.io.video import write_video
from proclab.reward.demo_reader import demo_table, open_store, read_demos
from proclab.reward.nets import load_reward_model, predict_rewards
from proclab.run.runtime import RuntimeConfig


def write_demo_video(
    data: Path,
    demo_id: str,
    out: Path,
    *,
    game: str | None = None,
    reward_model: Path | None = None,
    runtime: RuntimeConfig | None = None,
    fps: float = 15,
    scale: int = 6,
) -> tuple[str, int, float]:
    """The demo ``demo_id`` of the demo store ``data`` (of ``game``, needed only if the store holds several) as
    the mp4 ``out``, ``scale`` times upscaled; with ``reward_model`` (a trex train run or checkpoint directory,
    computed on ``runtime``), each frame's learned reward captioned too. Returns the demo's game, length and
    return."""
    store = open_store(data)
    game, table = demo_table(store, game)
    match = np.flatnonzero(table["demo_id"] == demo_id)
    if len(match) == 0:
        raise ProclabError(f"no {game} demo {demo_id!r} in {str(data)!r} (ids look like 0_203_931_872)")
    row = table["index"][match[0]]
    demo = read_demos(store, [row])
    actions = store.read(int(row), ["action"])["action"]
    learned = None
    if reward_model is not None:
        rt = (runtime or RuntimeConfig()).runtime()
        learned = predict_rewards(rt.prepare(load_reward_model(reward_model)[0]), demo.frames, rt)
    returns = np.cumsum(demo.rewards)
    captions = [
        [f"t={t}  r={demo.rewards[t]:g}  R={returns[t]:g}"]
        + ([f"learned r={learned[t]:.3f}"] if learned is not None else [])
        for t in range(len(demo.rewards))
    ]
    write_video(out, demo.frames, fps=fps, scale=scale, actions=actions, captions=captions)
    return game, len(actions), float(demo.returns[0])
