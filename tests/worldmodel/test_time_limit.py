"""`wm train --time-limit`: training stops after the update that crosses the budget, with a checkpoint."""

from proclab.io.checkpoint import find_checkpoint
from proclab.worldmodel.train import train_world_model


def test_a_time_limit_stops_after_the_first_update_that_crosses_it(make_config):
    run = train_world_model(make_config(total_updates=1000, time_limit=0.001), progress=False)
    assert (
        [p.name for p in (run / "checkpoints").iterdir()] == [find_checkpoint(run).name] == ["step_00000001"]
    )
