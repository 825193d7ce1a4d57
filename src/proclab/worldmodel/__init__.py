"""The generative agent-environment model: a differentiable simulator of a trained agent in its world.

API summary (details in each module; docs/worldmodel.md for the whole picture, docs/notebooks/world_model.ipynb
for a tour)::

    # train (proclab wm train): a preset's name or a WMTrainConfig, fields replaced by keywords
    world = train_world_model(store_path, "cpu", total_updates=300, run_root=out / "runs")
    world.model, world.agent, world.run_dir         # the WorldModel, its frozen agent, the run directory
    world = TrainedWorldModel.load(run_dir_or_checkpoint)   # fp32, as the commands compute

    # dream (proclab wm sample writes the same rows to a store) and judge (proclab wm evaluate)
    dreams = dream(world, start="informed", n=8, steps=10)   # a Dream: frames, actions, rewards, states
    dreams.plot(); dreams.table()
    evaluation = evaluate_world_model(world, data=held_out_store, settings=EvaluationSettings(windows=64))
    evaluation.table(); evaluation.plot(); evaluation.save(folder)

    # simulate (differentiable): Trajectory of (S, B, ...) tensors + per-step tensors for saliency
    wm, agent, ckpt = load_world_model(run_dir_or_checkpoint, make_runtime("cpu", "fp32"))
    traj = dreamed(wm, agent, bottleneck, steps, modal=True, env_grads=True)   # from bottleneck vectors
    start, traj = teacher_forced(wm, agent, batch)                            # training forward
    traj = imagined(wm, agent, batch, actions="true")                         # evaluation vs data
    traj.frame, traj.agent_state, traj.env_h, traj.logits, traj.value, traj.reward, traj.done_logit
    traj.per_step["frame"][k]          # the exact tensor the agent saw at step k (closed loop)

    # what wm sample and wm loss-over-time write (the commands are proclab.worldmodel.command)
    from proclab.worldmodel.sample import SamplingSettings, sample_rollouts
    store = sample_rollouts(run_dir, path, SamplingSettings(n=100, init="informed", steps=10), RuntimeConfig())

The window alignment (which recorded row labels which simulated step) is in :mod:`.batch`;
the loss table in :mod:`.losses`; the architecture in :mod:`.model`.
"""

from proclab.worldmodel.checkpoint import TrainedWorldModel, load_world_model
from proclab.worldmodel.config import WM_SIZES, LossWeights, WMTrainConfig, WorldModelConfig, wm_size
from proclab.worldmodel.dream import Dream, dream
from proclab.worldmodel.evaluation import EvaluationSettings, WorldModelEvaluation, evaluate_world_model
from proclab.worldmodel.model import Start, Trajectory, WorldModel
from proclab.worldmodel.simulate import dreamed, imagined, random_bottlenecks, teacher_forced
from proclab.worldmodel.trainer import train_world_model

__all__ = [
    "WM_SIZES",
    "Dream",
    "EvaluationSettings",
    "LossWeights",
    "Start",
    "TrainedWorldModel",
    "Trajectory",
    "WMTrainConfig",
    "WorldModel",
    "WorldModelConfig",
    "WorldModelEvaluation",
    "dream",
    "dreamed",
    "evaluate_world_model",
    "imagined",
    "load_world_model",
    "random_bottlenecks",
    "teacher_forced",
    "train_world_model",
    "wm_size",
]
