"""What every run shares, below every trainer: runtime, distribution, logging, checkpoint cadence, arguments."""
