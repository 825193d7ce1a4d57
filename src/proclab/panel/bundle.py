"""Writing a panel folder: the static app, plotly.js, ``data/panel.json``, array chunks, strips.

The layout is the contract between the exporter and the page (``panel.schema.json`` says it
field by field). Small per-sample data (actions, values, rewards, behaviour, strip names) sits
in ``panel.json``, which the page reads first. The large per-step arrays (IC and PC loadings,
gradient loadings per target: ``samples x steps x components``) are written as little-endian
float32 chunks of ``chunk`` samples each, so the page fetches only the chunk holding the
sample on screen, and all chunks of one array only when a filter needs them: a 6000-sample
panel opens without reading tens of megabytes first. Missing values (a real episode without
IC gradients) are NaN, which no filter range matches.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
from PIL import Image

from proclab.io.files import replacing, sweep_temporaries

FORMAT = "proclab-panel"
VERSION = 1
STATIC = resources.files("proclab.panel") / "static"
SCHEMA = resources.files("proclab.panel") / "panel.schema.json"


def plotly_js() -> Path:
    """plotly.min.js as shipped inside the pinned ``plotly`` wheel (no CDN, works offline)."""
    # lazy: plotly is slow to import, only a panel export copies its bundle
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise FileNotFoundError(f"plotly {plotly.__version__} ships no package_data/plotly.min.js")
    return path


def load_schema() -> dict:
    return json.loads(SCHEMA.read_text())


@dataclass
class PanelData:
    """Everything a panel shows, in memory; :func:`write_panel` lays it out on disk.

    ``doc`` is ``panel.json`` without its ``arrays`` section; ``arrays`` maps names
    (``ics``, ``pcs``, ``grad:<target>``) to ``(samples, steps, components)`` arrays; ``strips``
    maps a file name under ``data/strips/`` to an ``(H, W*steps, 3)`` uint8 image.
    """

    doc: dict
    arrays: dict[str, np.ndarray]
    strips: dict[str, np.ndarray] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    """Extra files copied under ``data/`` (intervention videos), by their name there."""


def _write_chunks(data_dir: Path, name: str, array: np.ndarray, chunk: int) -> dict:
    slug = name.replace(":", "_")
    files = []
    a = np.ascontiguousarray(array, dtype="<f4")
    for i, start in enumerate(range(0, max(len(a), 1), chunk)):
        rel = f"arrays/{slug}_{i:03d}.f32"
        (data_dir / rel).write_bytes(a[start : start + chunk].tobytes())
        files.append(rel)
    return {"shape": list(a.shape), "chunk": chunk, "files": files}


def write_panel(out: Path, data: PanelData, chunk: int = 500) -> Path:
    """Write the panel folder ``out`` (replacing a previous export there) and return it.

    The panel is laid out in a hidden sibling folder and renamed into place when complete
    (:func:`proclab.io.files.replacing`), so ``out`` always holds a whole export, the earlier or
    the new one: an export that is killed or meets a full disk leaves the earlier one as it was.
    """
    out = Path(out)
    sweep_temporaries(out.parent)  # what killed exports left
    with replacing(out, "panel") as tmp:
        data_dir = tmp / "data"
        for sub in ("arrays", "strips"):
            (data_dir / sub).mkdir(parents=True)
        for item in STATIC.iterdir():
            (tmp / item.name).write_bytes(item.read_bytes())
        shutil.copyfile(plotly_js(), tmp / "plotly.min.js")
        arrays = {name: _write_chunks(data_dir, name, a, chunk) for name, a in data.arrays.items()}
        for name, image in data.strips.items():
            Image.fromarray(image).save(data_dir / "strips" / name)
        for name, src in data.files.items():
            (data_dir / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, data_dir / name)
        doc = {"format": FORMAT, "version": VERSION, **data.doc, "arrays": arrays}
        (data_dir / "panel.json").write_text(json.dumps(doc, separators=(",", ":"), allow_nan=False))
    return out


def read_array(panel: Path, doc: dict, name: str) -> np.ndarray:
    """An array of an exported panel, its chunks joined (what the page sees, for checks)."""
    spec = doc["arrays"][name]
    parts = [np.frombuffer((Path(panel) / "data" / f).read_bytes(), dtype="<f4") for f in spec["files"]]
    return np.concatenate(parts).reshape(spec["shape"])


def rounded(x: np.ndarray, digits: int = 3) -> list:
    """A float array as nested lists rounded for JSON (NaN not allowed: callers fill it first)."""
    return np.round(np.asarray(x, dtype=np.float64), digits).tolist()


def extrema(loadings: np.ndarray, steps: list[int] | None = None, fraction: float = 0.01) -> list[dict]:
    """Per IC, the samples with a (sample, step) loading in the top, middle and bottom ``fraction``.

    ``loadings`` is ``(samples, steps, components)``; ``steps`` restricts the pairs ranked (None:
    any step). A sample is listed once however many of its steps qualify; ties break by
    position, so the lists are deterministic. NaN loadings are never extreme.
    """
    x = loadings if steps is None else loadings[:, steps]
    n_steps = x.shape[1]
    out = []
    for c in range(x.shape[2]):
        v = x[:, :, c].ravel()
        finite = np.flatnonzero(np.isfinite(v))
        order = finite[np.argsort(v[finite], kind="stable")]
        m = max(1, round(len(order) * fraction)) if len(order) else 0
        mid = (len(order) - m) // 2
        lists = {"top": order[len(order) - m :], "middle": order[mid : mid + m], "bottom": order[:m]}
        out.append({k: sorted(set((idx // n_steps).tolist())) for k, idx in lists.items()})
    return out


def histograms(loadings: np.ndarray, bins: int = 40) -> list[dict]:
    """Per component, counts over ``bins`` equal bins of its finite values."""
    out = []
    for c in range(loadings.shape[-1]):
        v = loadings[..., c].ravel()
        v = v[np.isfinite(v)]
        counts, edges = (
            np.histogram(v, bins=bins) if len(v) else (np.zeros(bins, int), np.linspace(0, 1, bins + 1))
        )
        out.append({"edges": rounded(edges, 4), "counts": counts.astype(int).tolist()})
    return out
