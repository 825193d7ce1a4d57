"""Recording agents into the episode store: the recorder, action noise, and the ``proclab record`` command.

It sits above ``rl`` (it plays episodes with the actor of :mod:`proclab.rl.rollout`) and writes through
:mod:`proclab.store`, which lies below every model::

    EpisodeRecorder(env, agent, runtime, noise=ActionNoise.parse("seed"), ...).run(episodes, sink)
    recording, ckpt = prepare_recording(agent, path, RecordSettings(episodes=N, ...))  # a Recording
    record_shard(recording, path, episodes, runtime=RuntimeConfig(...), checkpoint=ckpt)  # one shard of a `proclab record` run (Ray-friendly)

Recordings: :mod:`.recording`; the command ``proclab record``: :mod:`.command`.
"""

from proclab.record.noise import ActionNoise
from proclab.record.recorder import EpisodeRecorder
from proclab.record.recording import Recording, RecordSettings, new_recording, prepare_recording, record_shard

__all__ = [
    "ActionNoise",
    "EpisodeRecorder",
    "RecordSettings",
    "Recording",
    "new_recording",
    "prepare_recording",
    "record_shard",
]
