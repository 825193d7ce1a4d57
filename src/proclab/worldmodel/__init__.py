"""The generative agent-environment model: a differentiable simulator of a trained agent in its world.

API summary (details in each module; docs/worldmodel.md for the whole picture)::

    # train (proclab wm train): returns the run directory
    cfg = replace(wm_size("small"), data=store_path, total_updates=300, run_root=out / "runs")
    run_dir = train_world_model(cfg)

    # load: the world model and its frozen agent (stored inside the checkpoint)
    wm, agent, ckpt = load_world_model(run_dir_or_checkpoint, make_runtime("cpu", "fp32"))

    # simulate (differentiable): Trajectory of (S, B, ...) tensors + per-step tensors for saliency
    traj = dreamed(wm, agent, bottleneck, steps, modal=True, env_grads=True)   # from bottleneck vectors
    start, traj = teacher_forced(wm, agent, batch)                            # training forward
    traj = imagined(wm, agent, batch, actions="true")                         # evaluation vs data
    traj.frame, traj.agent_state, traj.env_h, traj.logits, traj.value, traj.reward, traj.done_logit
    traj.per_step["frame"][k]          # the exact tensor the agent saw at step k (closed loop)

    # sample (proclab wm sample) and measure the drift from the data (proclab wm loss-over-time)
    store = sample_rollouts(SampleArgs(wm=run_dir, n=100, init="informed", steps=10, out=path))
    result = loss_over_time(LossOverTimeArgs(wm=run_dir, data=held_out_store, out=path))

The window alignment (which recorded row labels which simulated step) is in :mod:`.batch`;
the loss table in :mod:`.losses`; the architecture in :mod:`.model`.
"""

from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.config import WM_SIZES, LossWeights, WMTrainConfig, WorldModelConfig, wm_size
from proclab.worldmodel.loss_over_time import LossOverTimeArgs, loss_over_time
from proclab.worldmodel.model import Start, Trajectory, WorldModel
from proclab.worldmodel.sample import SampleArgs, sample_rollouts
from proclab.worldmodel.simulate import dreamed, imagined, random_bottlenecks, teacher_forced
from proclab.worldmodel.train import train_world_model

__all__ = [
    "WM_SIZES",
    "LossOverTimeArgs",
    "LossWeights",
    "SampleArgs",
    "Start",
    "Trajectory",
    "WMTrainConfig",
    "WorldModel",
    "WorldModelConfig",
    "dreamed",
    "imagined",
    "load_world_model",
    "loss_over_time",
    "random_bottlenecks",
    "sample_rollouts",
    "teacher_forced",
    "train_world_model",
    "wm_size",
]
