"""`proclab panel export` under a full disk, with damaged inputs, and killed with SIGKILL mid-export:
the panel folder always holds one whole export, and a rerun equals an uninterrupted export."""

import json
import shutil
from pathlib import Path

import pytest

from proclab.cli import main
from support import disk_full, one_line_error, proclab_killed_at_write

ARGS = ["--samples", "12", "--real", "2", "--chunk", "4", "--background", "100"]


def export(analysis: Path, out: Path, *extra: str) -> list[str]:
    return ["panel", "export", str(analysis), "--out", str(out), *ARGS, *extra]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def without_time(files: dict[str, bytes]) -> dict:
    """An export's files with panel.json's creation time left out."""
    doc = json.loads(files["data/panel.json"])
    doc["meta"].pop("created")
    return {**files, "data/panel.json": doc}


def siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir())


def test_a_full_disk_leaves_the_earlier_export_whole(analysis, tmp_path, capsys):
    out = tmp_path / "P"
    main(export(analysis, out))
    before = snapshot(out)
    with disk_full(tmp_path, after=100_000):
        err = one_line_error(capsys, export(analysis, out, "--samples", "8"))
    assert f"cannot write panel {str(out)!r}: No space left on device" in err, err
    assert snapshot(out) == before and siblings(out) == ["P"]


def test_kill_9_mid_export_then_rerun_gives_the_uninterrupted_panel(analysis, tmp_path):
    clean, out = tmp_path / "clean" / "P", tmp_path / "work" / "P"
    main(export(analysis, clean))
    main(export(analysis, out, "--samples", "8"))  # an earlier export, of fewer samples
    earlier = snapshot(out)
    killed = proclab_killed_at_write(out.parent, 12, *export(analysis, out))
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert snapshot(out) == earlier  # the half-written export is not visible as the panel
    main(export(analysis, out))
    assert without_time(snapshot(out)) == without_time(snapshot(clean))
    assert siblings(out) == ["P"]  # the killed run's folder is swept


@pytest.mark.parametrize("damage", ["intervention summary", "eval results"])
def test_a_damaged_input_is_one_line_naming_it(analysis, tmp_path, capsys, damage):
    work = shutil.copytree(analysis, tmp_path / "A")
    extra = []
    if damage == "intervention summary":
        path = work / "intervene" / "summary.json"
        path.parent.mkdir()
        path.write_text(json.dumps({"sim": {"samples": 4}})[:9])
    else:
        path = tmp_path / "eval.json"
        path.write_text("")
        extra = ["--eval", str(path)]
    err = one_line_error(capsys, export(work, tmp_path / "P", *extra))
    assert f"{damage} {str(path)!r} is" in err, err
