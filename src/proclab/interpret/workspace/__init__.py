"""What every ``proclab analyze`` command shares: the analysis folder, arguments, phases, selections, figures."""
