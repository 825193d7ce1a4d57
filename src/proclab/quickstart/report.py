"""The quickstart's page, ``OUT/index.html``: numbers, plots, videos and the stage times on one page.

The page is static and self-describing (relative links only), so it opens from disk, can be
copied with its folder, and needs no server; values are escaped and nothing is executed. Its
media sections are one table (:data:`SECTIONS`) of globs under the folder, so a stage that adds
plots shows up without touching this module.
"""

from __future__ import annotations

import html
from pathlib import Path

from proclab.io.files import read_json, write_text

_STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0; }
td, th { padding: 3px 12px; border-bottom: 1px solid #eee; text-align: right; }
td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; } video { margin: 4px; background: #000; } code { background: #f4f4f4; padding: 1px 4px; }
.grid img { max-width: 48%; margin: 4px; vertical-align: top; } .note { color: #555; }
"""

SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Training",
        "The agent's training curves and what it sees when it plays (action, value, reward overlaid).",
        ("curves.png", "agent.mp4"),
    ),
    (
        "Dreams",
        "Held-out windows: true frames and the world model's teacher-forced, imagined (recorded "
        "actions) and closed-loop (the agent's own actions) predictions; then sampled dreams.",
        ("dream-strip.png", "dream.png", "samples/videos/*.mp4"),
    ),
    (
        "Hidden state",
        "The agent's hidden states (real and dreamed): PCA/ICA basis, clusters, t-SNE.",
        ("analysis/hidden/*.png",),
    ),
    ("Environment states", "The world model's environment states of the dreams.", ("analysis/env/*.png",)),
    (
        "Saliency",
        "What the value, the action and the first ICs depend on, with and without gradients "
        "through the environment.",
        ("analysis/saliency/strips/*.png", "analysis/saliency/videos/*.mp4"),
    ),
    (
        "Behaviours",
        "Clusters of dreamed behaviour and an example video of each.",
        ("analysis/behaviours/*.png", "analysis/behaviours/videos/*.mp4"),
    ),
    (
        "Interventions",
        "Each IC held at its recording mean, a resampled recorded value, its 5th and 95th percentiles, "
        "on paired held-out levels of the real game: changes against the plain agent "
        "with corrected confidence intervals (analysis/sweep/sweep_table.txt has every number).",
        ("analysis/sweep/*.png",),
    ),
    (
        "Direction atlas",
        "Per IC, the mean saliency of its coordinate on the frames where it is most active, and gradient-"
        "predicted against measured effects of the sweep's on-data edits (analysis/atlas/atlas.txt has each "
        "card's one-line summary; the panel opens on the full cards).",
        ("analysis/atlas/prediction.png", "analysis/atlas/saliency/*.png"),
    ),
)
"""(title, caption, globs relative to the folder) per media section, in page order."""

MAX_MEDIA = 24


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _spread(row: dict) -> str:
    return f"{row['return_mean']:.2f} ± {row['return_std']:.2f} (n={row['episodes']})"


def _eval_section(out: Path, name: str) -> str:
    table = read_json(out / name, "evaluation table")
    random = {(r["split"], r["game"]): r for r in table.get("random", [])}
    rows = []
    for r in table["rows"]:
        base = random.get((r["split"], r["game"]))
        rows.append(
            [r["split"], r["game"], _spread(r), _spread(base) if base else "", f"{r['normalized_score']:.3f}"]
        )
    header = ["levels", "game", "agent: return ± std", "random agent", "agent: normalised score"]
    roles = table.get("roles", {"train": "training levels", "test1": "held-out levels"})
    note = (
        "<p class='note'>Sampled actions; "
        + html.escape(", ".join(f"{k} = {v}" for k, v in roles.items()))
        + ".</p>"
    )
    return "<h2>Evaluation</h2>" + _table(header, rows) + note


def _dream_section(out: Path, name: str) -> str:
    quality = read_json(out / name, "dream quality")
    header = ["frame MSE at step", *map(str, quality["steps"])]
    rows = [
        [label, *("" if v is None else f"{v:.4f}" for v in values)]
        for label, values in quality["mse"].items()
    ]
    caption = (
        f"<p class='note'>Mean squared pixel error (frames in [0, 1]) on {quality['windows']} windows of "
        "held-out episodes, k frames after the last one the model saw.</p>"
    )
    return "<h2>Dream quality</h2>" + _table(header, rows) + caption


def _media(out: Path, path: Path) -> str:
    rel = html.escape(path.relative_to(out).as_posix())
    if path.suffix == ".mp4":
        return f'<video src="{rel}" controls loop muted width="320" title="{rel}"></video>'
    return f'<img src="{rel}" alt="{rel}" title="{rel}">'


def write_report(out: Path, summary: dict) -> Path:
    """``out/index.html`` from the quickstart's ``summary`` and the files under ``out``."""
    out = Path(out)
    m = summary["machine"]
    title = f"proclab quickstart: {summary['game']}"
    parts = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{html.escape(summary['budget'])} budget, {summary['minutes']} min on {html.escape(str(m['cpu']))} "
        f"({m['cores']} cores, native bf16: {'yes' if m['native_bf16'] else 'no'}), device "
        f"{html.escape(m['device'])}, {html.escape(m['precision'])}.</p>",
    ]
    outputs = summary["outputs"]
    if "eval" in outputs:
        parts.append(_eval_section(out, outputs["eval"]["eval"]))
    if "wm-sample" in outputs:
        parts.append(_dream_section(out, outputs["wm-sample"]["dream"]))
    for heading, caption, patterns in SECTIONS:
        files = [p for pattern in patterns for p in sorted(out.glob(pattern))][:MAX_MEDIA]
        if files:
            media = "".join(_media(out, p) for p in files)
            parts.append(
                f"<h2>{html.escape(heading)}</h2><p class='note'>{html.escape(caption)}</p>"
                f"<div class='grid'>{media}</div>"
            )
    if "panel" in outputs:
        folder = outputs["panel"]["folder"]
        parts.append(
            f"<h2>Interactive panel</h2><p>Serve it with <code>proclab panel serve {html.escape(str(out / folder))}"
            f"</code> and open the URL it prints (<a href='{html.escape(folder)}/index.html'>panel folder</a>; "
            "browsers refuse its data files when opened straight from disk).</p>"
        )
    rows = [[name, f"{seconds:.1f}"] for name, seconds in summary["seconds"].items()]
    rows.append(["total", f"{sum(summary['seconds'].values()):.1f}"])
    parts.append("<h2>Stage times</h2>" + _table(["stage", "seconds"], rows))
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{''.join(parts)}</body></html>"
    )
    return write_text(out / "index.html", page, "report")
