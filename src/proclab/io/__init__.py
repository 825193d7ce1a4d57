"""Input/output: checkpoints, run directories and metric logs, videos."""
