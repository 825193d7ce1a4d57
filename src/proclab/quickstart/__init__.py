"""The whole interpreting-rl-behavior pipeline, at a budget's scale, in one folder (``proclab quickstart``).

train a recurrent agent -> eval (beside a random agent) -> render -> plot -> record -> wm train
-> wm sample (+ dream quality) -> analyze hidden, env, saliency, behaviours, the intervention sweep
and the direction atlas -> panel export (opening on the atlas),
then ``OUT/index.html`` showing all of it (:mod:`proclab.quickstart.report`). The stages are one table,
:data:`~proclab.quickstart.stages.STAGES`; each is the real command, sized by a
:class:`~proclab.quickstart.budgets.Budget`. ``OUT/quickstart.json`` (the ledger) records every
finished stage with its outputs and seconds, so a rerun continues where a crash stopped it and
``--from STAGE`` redoes a stage and everything after it. :mod:`.pipeline` runs them; :mod:`.command` is the
command line.
"""
