"""Progress bars draw on standard error, so a command's standard output holds only what it prints."""

from proclab.io.progress import analysis_phases, progress_bar


def test_a_bar_draws_on_stderr_and_leaves_stdout_to_the_command(capsys):
    with progress_bar() as bar:
        task = bar.add_task("counting levels", total=3)
        for _ in range(3):
            bar.advance(task)
    print('{"json": 1}')
    out, err = capsys.readouterr()
    assert out == '{"json": 1}\n'
    assert "counting levels" in err


def test_an_analysis_bar_also_draws_on_stderr(capsys):
    with analysis_phases(True, 2, "probing") as ph:
        with ph.phase("fit"):
            pass
        with ph.phase("score"):
            pass
    # a transient bar leaves nothing once it ends; off a terminal rich still writes its live region's
    # line breaks, which were the blank lines in a driver's JSON-lines output
    assert capsys.readouterr().out == ""
