"""What every ``proclab analyze`` command shares: the analysis folder, arguments, selections, figures (their
progress bar over phases is :mod:`proclab.io.progress`, which every analysis of ``proclab.analyze`` shows)."""
