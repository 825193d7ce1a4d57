"""A one-page HTML report of a quickstart (or any run): numbers, curves and videos together.

The page is static and self-describing (relative links only), so it opens from disk, can be
copied with its folder, and needs no server. Values are escaped; nothing is executed.
"""

from __future__ import annotations

import html
from pathlib import Path

_STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; } td, th { padding: 4px 12px; border-bottom: 1px solid #eee; text-align: right; }
td:first-child, th:first-child, td:nth-child(2), th:nth-child(2) { text-align: left; }
img { max-width: 100%; } video { margin: 4px; background: #000; } code { background: #f4f4f4; padding: 1px 4px; }
"""

# (row key, column title, format spec) for the evaluation table.
_EVAL_COLUMNS = [
    ("split", "split", ""),
    ("game", "game", ""),
    ("episodes", "episodes", "d"),
    ("return_mean", "return (mean)", ".2f"),
    ("return_std", "std", ".2f"),
    ("normalized_score", "normalised score", ".3f"),
]


def _table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title, _ in columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(format(row[key], fmt))}</td>" for key, _, fmt in columns)
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def write_report(out_dir: Path, title: str, summary: dict, eval_table: dict | None = None) -> Path:
    """``out_dir/index.html`` showing ``summary``, the eval table and every PNG/mp4 found under ``out_dir``."""
    out_dir = Path(out_dir)
    parts = [f"<h1>{html.escape(title)}</h1>"]
    facts = "".join(
        f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>"
        for k, v in summary.items()
        if not isinstance(v, dict | list)
    )
    parts.append(f"<h2>Run</h2><table>{facts}</table>")
    if eval_table:
        parts.append("<h2>Evaluation</h2>")
        parts.append(_table(eval_table["rows"], _EVAL_COLUMNS))
    images = sorted(p for p in out_dir.glob("*.png"))
    if images:
        parts.append("<h2>Curves</h2>")
        parts += [f'<p><img src="{html.escape(p.relative_to(out_dir).as_posix())}"></p>' for p in images]
    videos = sorted(out_dir.rglob("*.mp4"))
    if videos:
        parts.append("<h2>Videos</h2>")
        for video in videos[:24]:
            rel = html.escape(video.relative_to(out_dir).as_posix())
            parts.append(f'<video src="{rel}" controls loop muted width="256" title="{rel}"></video>')
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{''.join(parts)}</body></html>"
    )
    path = out_dir / "index.html"
    path.write_text(page)
    return path
