"""``proclab analyze atlas``: one card per direction of a basis, every entry measured.

Per direction ``m`` of the chosen coordinates (``--basis ica|pca|nmf|sparse|units``,
:mod:`proclab.interpret.workspace.systems`), over the states of the first ``--episodes`` recorded
episodes:

1. **what activates it** (:mod:`~proclab.interpret.atlas.activation`): its top and bottom moments,
   each a frame strip ``t - 4 .. t + 4`` with the coordinate's trace
   (:mod:`~proclab.interpret.atlas.strips`), how often it is active, its kurtosis and where in the
   episode it fires;
2. **what it tracks** (:mod:`~proclab.interpret.atlas.tracking`): correlations with value, reward,
   each action, progress, the last step and Procgen's end-of-episode events, at lags ``-8 .. 8``,
   with intervals from resampling episodes;
3. **what it causes** (:mod:`~proclab.interpret.atlas.causes`): its rows of the intervention sweep of
   this basis (``ANALYSIS/sweep[-<basis>]``), off-data edits marked; or "sweep not run";
4. **what it looks at** (:mod:`~proclab.interpret.atlas.looks_at`): the mean SmoothGrad map of its
   coordinate on the real frames where it is most active;
5. **predicted against measured** (:mod:`~proclab.interpret.atlas.prediction`): gradient x edit size
   beside the sweep's measured change, and across directions the Spearman correlation with a CI;
6. **how stable it is** (:mod:`~proclab.interpret.bases.stability`): its ICASSO quality index over
   refits of the basis with new seeds and on resampled episodes; an unstable direction is flagged, and
   a significant sweep effect of one is marked "claim withheld";
7. a one-line summary from 2-3 of those numbers (:mod:`~proclab.interpret.atlas.cards`).

``--basis sparse`` first fits the folder's sparse dictionary (:mod:`~proclab.interpret.bases.sparse_dictionary`)
when it has none (or with ``--refit``). Outputs in ``ANALYSIS/atlas[-<basis>]/``: ``atlas.json``
(every number; the panel's front page reads it), ``atlas.txt`` (one line per card), ``strips/`` and
``saliency/`` (PNGs), ``prediction.png``.

:func:`build_atlas` measures the cards of any episodes (:mod:`proclab.interpret.atlas.episodes`) and
returns them with their pictures; :func:`atlas` builds them on a rollout in memory and returns an
:class:`Atlas` (``proclab.analyze.atlas``), the command on the episodes of a recorded store.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, cast

import numpy as np

from proclab.envs.actions import ACTION_NAMES
from proclab.errors import ProclabError, unknown_choice
from proclab.interpret.atlas.activation import describe
from proclab.interpret.atlas.cards import sort_keys, summary_line, tracked
from proclab.interpret.atlas.causes import direction_causes, sweep_note
from proclab.interpret.atlas.episodes import RolloutEpisodes, StoreEpisodes
from proclab.interpret.atlas.looks_at import saliency_images
from proclab.interpret.atlas.prediction import (
    PAIRINGS,
    head_gradients,
    pairing,
    predicted_changes,
    verdict,
)
from proclab.interpret.atlas.strips import strip_image, window
from proclab.interpret.atlas.tracking import step_quantities, tracking
from proclab.interpret.bases.activations import hook_key
from proclab.interpret.bases.coordinates import Coordinates, LinearCoordinates, encode_all, variance_explained
from proclab.interpret.bases.pca_ica import KINDS, Kind
from proclab.interpret.bases.random_directions import WithRandom
from proclab.interpret.bases.stability import refitter, stability
from proclab.interpret.saliency.real_frames import agent_states
from proclab.interpret.saliency.world_model import basis_hook
from proclab.interpret.stats.proportions import compare_shares, share
from proclab.io.files import subplots
from proclab.io.progress import analysis_phases
from proclab.io.results import Result
from proclab.models.edited import module_of
from proclab.models.hooks import device_of
from proclab.models.interventions import state_hook
from proclab.store.schema import STATE_OUT
from proclab.store.state_codec import StateCodec

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from proclab.interpret.bases.pca_ica import Basis
    from proclab.interpret.sweep.run import Sweep
    from proclab.models.edited import AgentLike
    from proclab.record.rollout import Rollout


NAME = "atlas"
FORMAT = "proclab-atlas"


@dataclass(frozen=True)
class AtlasSettings:
    """How :func:`atlas` measures the cards (the options of ``proclab analyze atlas``, same names and
    meanings; ``kind`` is what its ``--basis`` says of a PCA/ICA basis)."""

    kind: str = "ica"
    """The coordinates of a :class:`~proclab.interpret.bases.pca_ica.Basis` described: ica or pca (unused when
    the basis given is a :class:`~proclab.interpret.bases.coordinates.Coordinates` already)."""
    moments: int = 4
    """Top and bottom moments shown per direction (one per episode)."""
    bootstrap: int = 1000
    """Resamples of episodes (correlations) and of directions (the Spearman interval)."""
    lags: int = 8
    """Lead/lag: correlations at -lags .. lags steps."""
    saliency_moments: int = 8
    """Most active moments whose saliency maps are averaged per direction (0: none)."""
    noise: int = 8
    """SmoothGrad: noised copies of each frame (0: the plain gradient)."""
    sigma: float = 0.05
    """SmoothGrad: noise std on frames in [0, 1]."""
    predict_steps: int = 2000
    """Recorded states at which gradients predict each edit's effect."""
    random_directions: int = 0
    """Random unit directions of the span, whose tracking is the baseline."""
    stability_seeds: int = 5
    """Refits of the basis with new seeds (0: none)."""
    stability_bootstraps: int = 5
    """Refits on resampled episodes (0 and no seeds: stability not measured)."""
    seed: int = 0
    """The bootstraps, the states sampled for the gradient prediction, the random directions."""

    def check(self) -> None:
        if self.kind not in KINDS:
            raise unknown_choice("kind", self.kind, KINDS)
        for name in ("bootstrap", "lags"):
            if getattr(self, name) < 1:
                raise ProclabError(f"--{name} must be >= 1, got {getattr(self, name)}")
        for f in fields(self):
            if f.name not in ("kind", "sigma", "seed") and getattr(self, f.name) < 0:
                raise ProclabError(f"--{f.name.replace('_', '-')} must be >= 0, got {getattr(self, f.name)}")


@dataclass(frozen=True)
class AtlasInputs:
    """What an atlas is built from (the command resolves them from a folder, :func:`atlas` from a rollout;
    tests pass their own)."""

    recorded: StoreEpisodes | RolloutEpisodes  # the real episodes
    x: np.ndarray  # (N, D) states of those episodes, rows in episode order
    coords: Coordinates
    agent: AgentLike
    hook: str  # per-step hook point of the described state
    sweep: dict | None
    sweep_note: str


@dataclass(frozen=True, repr=False)
class Atlas(Result):
    """One card per direction (``cards``: what activates it, what it tracks, causes and looks at, how
    stable it is, a one-line summary) and the atlas-wide numbers: what the command's ``atlas.json`` holds
    beside the folder's facts; ``gradients`` (direction -> its mean saliency map, ``saliency.npz``) and
    ``images`` (the strips and saliency pictures the cards name, relative path -> RGB) beside them."""

    label: str
    nonnegative: bool
    k: int
    dim: int
    variance_explained: float
    basis_fit: dict | None
    sweep_note: str
    cards: list[dict]
    counts: dict
    prediction: dict
    stability: dict
    random_baseline: dict | None
    steps: int
    quantities: list[str]
    lags: list[int]
    gradients: dict[int, np.ndarray] = field(repr=False)
    images: dict = field(repr=False)

    def summary(self) -> dict:
        """Every field but the gradients and the pictures (what ``atlas.json`` holds of the result)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("gradients", "images")}

    def table(self) -> list[dict]:
        return [
            {
                "direction": c["label"],
                "active": c["activation"]["active"],
                "kurtosis": c["activation"]["kurtosis"],
                "summary": c["summary"],
            }
            for c in self.cards
        ]

    def plot(self, ax: Axes | None = None) -> Figure:
        """Predicted against measured effect of the sweep's on-data edits (as ``prediction.png``)."""
        if "points" not in self.prediction:
            raise ProclabError(f"no prediction to draw: {self.prediction['note']}")
        if ax is not None:
            raise ProclabError("the prediction has one panel per pairing: call plot() without ax")
        return prediction_figure(self.prediction["points"], self.prediction["pairings"])


def atlas(
    agent: AgentLike,
    hook: str,
    *,
    basis: Basis | Coordinates,
    rollout: Rollout,
    sweep: Sweep | dict | None = None,
    settings: AtlasSettings = AtlasSettings(),
    progress: bool = True,
) -> Atlas:
    """The atlas of ``basis`` (a :class:`~proclab.interpret.bases.pca_ica.Basis`, described by its
    ``settings.kind`` coordinates, or any :class:`~proclab.interpret.bases.coordinates.Coordinates`: NMF,
    sparse, units) of the recurrent state at hook point ``hook``, on the episodes of ``rollout``: ``agent`` (any
    agent in memory; its states are the rollout's when it played it, else replayed on its frames) is replayed
    for saliency and gradients; ``sweep`` (a :class:`~proclab.interpret.sweep.run.Sweep` of the same basis, or
    its summary) says what each direction causes. ``progress``: show the measures as they run."""
    settings.check()
    # settings.kind is one of KINDS (settings.check())
    coords = basis if isinstance(basis, Coordinates) else LinearCoordinates(basis, cast(Kind, settings.kind))
    states = agent_states(agent, rollout)
    key = hook_key(hook, agent)
    if key not in states:
        raise unknown_choice("recurrent state's hook point", hook, [state_hook(k) for k in states])
    recorded = RolloutEpisodes(
        rollout, states, {k: v[0].float().cpu().numpy() for k, v in agent.initial_state(1).items()}
    )
    x = recorded.rows(states[key]).reshape(int(recorded.lengths.sum()), -1).astype(np.float32)
    if coords.dim != x.shape[1]:
        raise ProclabError(f"the basis describes {coords.dim}-d states; {hook} has {x.shape[1]}")
    summary = sweep if sweep is None or isinstance(sweep, dict) else sweep.summary
    note = "sweep not run (none given)" if summary is None else sweep_note(summary)
    state = basis_hook(STATE_OUT + key, StateCodec(agent.state_shapes()))
    return build_atlas(AtlasInputs(recorded, x, coords, agent, state, summary, note), settings, progress)


def episode_rows(recorded) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lengths, and per row of the concatenated episodes its episode (id) and step."""
    lengths = recorded.lengths
    episode = np.repeat(recorded.ids, lengths)
    step = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return lengths, episode, step


def build_atlas(inp: AtlasInputs, settings: AtlasSettings, progress: bool = True) -> Atlas:
    """Every card, the atlas-wide numbers and the pictures the cards name; ``progress``: show the measures as
    they run."""
    coords, args, images = inp.coords, settings, {}
    with analysis_phases(progress, 7, "atlas") as ph:
        with ph.phase("encoding"):
            c = encode_all(coords, inp.x)
            lengths, episode, step = episode_rows(inp.recorded)
            steps = step_quantities(inp.recorded, list(ACTION_NAMES))
        with ph.phase("activity"):
            most = max(args.moments, args.saliency_moments)
            acts = [describe(c[:, m], lengths, coords.nonnegative, most) for m in range(coords.k)]
            for a in acts:  # rows -> (episode, step)
                for side in ("top", "bottom"):
                    a[f"{side}_moments"] = [(int(episode[r]), int(step[r])) for r in a.pop(f"{side}_rows")]
        with ph.phase("tracking"):
            track = tracking(c, steps, args.lags, args.bootstrap, args.seed, progress=ph.fraction)
            baseline = _random_baseline(inp, track, steps, args)
        with ph.phase("moments"):
            moments = _moment_strips(inp, c, acts, lengths, args.moments, images)
        with ph.phase("saliency"):
            looks = _saliency(inp, acts, args, images)
        with ph.phase("prediction"):
            prediction = _prediction(inp, c, episode, step, args)
        with ph.phase("stability"):
            stable = _stability(inp, lengths, args, ph.fraction)
    doc = _cards(inp, c, acts, track, steps.names, moments, looks, prediction, stable)
    fit = getattr(coords, "fit_info", None)
    return Atlas(
        label=coords.label,
        nonnegative=coords.nonnegative,
        k=coords.k,
        dim=coords.dim,
        variance_explained=variance_explained(coords, inp.x, *zscoring(coords)),
        basis_fit=None if fit is None else {k: v for k, v in fit.items() if k != "active_share"},
        sweep_note=inp.sweep_note,
        **doc,
        random_baseline=baseline,
        steps=len(c),
        quantities=steps.names,
        lags=track["lags"].tolist(),
        images=images,
    )


def zscoring(coords: Coordinates) -> tuple[np.ndarray, np.ndarray]:
    """The z-scoring variance is measured in: the basis's for its PCA/ICA coordinates, else the system's
    own (the NMF's and the units' are the basis's, the sparse dictionary's its own)."""
    basis = getattr(coords, "basis", None)
    z = coords if basis is None else basis
    # a system that is no basis's coordinates (NMF, units, a sparse dictionary) has its own z-scoring
    return z.mean, z.std  # pyright: ignore[reportAttributeAccessIssue]


def _moment_strips(inp: AtlasInputs, c, acts, lengths, count: int, images: dict) -> list[dict]:
    """Per direction, its top and bottom moments (episode, step, value), each with its strip (put in
    ``images``)."""
    starts = np.cumsum(lengths) - lengths
    of_episode = {int(e): j for j, e in enumerate(inp.recorded.ids)}
    result = []
    for m, a in enumerate(acts):
        scale = tuple(np.percentile(c[:, m], [0.5, 99.5]).tolist())
        found: dict[str, list[dict]] = {}
        for side in ("top", "bottom"):
            found[side] = []
            for i, (e, t) in enumerate(a[f"{side}_moments"][:count]):
                j = of_episode[e]
                lo, hi = window(int(lengths[j]), t)
                frames = inp.recorded.frames(e, lo, hi)
                trace = c[starts[j] + lo : starts[j] + hi, m]
                name = f"strips/{inp.coords.label.lower()}{m:03d}_{side}{i}.png"
                images[name] = strip_image(frames, lo, t, trace, scale)
                value = float(c[starts[j] + t, m])
                found[side].append({"episode": e, "step": t, "value": value, "strip": name})
        result.append(found)
    return result


def _saliency(inp: AtlasInputs, acts: list[dict], args: AtlasSettings, images: dict) -> dict[int, dict]:
    """The mean saliency map of every direction that is ever active, on its most active moments (its
    picture put in ``images``)."""
    if args.saliency_moments == 0:
        return {}
    moments = {
        m: a["top_moments"][: args.saliency_moments]
        for m, a in enumerate(acts)
        if not (inp.coords.nonnegative and a["active"] == 0)
    }
    looks = saliency_images(
        inp.agent, inp.coords, inp.hook, inp.recorded, moments, noise=args.noise, sigma=args.sigma
    )
    for look in looks.values():
        images[f"saliency/{look['image']}"] = look.pop("picture")
    return looks


def _prediction(inp: AtlasInputs, c: np.ndarray, episode, step, args: AtlasSettings) -> dict:
    """Gradient x edit size against the sweep's measured change for every on-data edit, and per pairing
    the Spearman correlation across directions (:mod:`proclab.interpret.atlas.prediction`)."""
    if inp.sweep is None or args.predict_steps == 0:
        return {"note": inp.sweep_note if inp.sweep is None else "not measured (--predict-steps 0)"}
    rng = np.random.default_rng([args.seed, 5])
    pick = np.sort(rng.choice(len(c), min(args.predict_steps, len(c)), replace=False))
    rows = [(int(episode[r]), int(step[r])) for r in pick]
    gv, gpi = head_gradients(inp.agent, inp.hook, inp.recorded, rows, device_of(module_of(inp.agent)))
    perm = rng.permutation(gv.shape[1])  # the shuffled-gradient baseline: state units permuted
    dirs = inp.coords.directions()
    points = []
    for r in inp.sweep["results"]:
        m = r["direction"]
        if r["edit"]["off_data"] or m >= c.shape[1]:
            continue
        n = len(pick)
        if r["arm"] == "resample":  # a recorded value per state, as the sweep draws one per episode
            held = c[rng.integers(0, len(c), n), m].astype(np.float64)
        else:
            held = np.full(n, r["edit"]["value"])
        measured = {"value": r["return"]["change"], "actions": r["tv_distance"]["value"]}
        pred = predicted_changes(gv, gpi, dirs[m], c[pick, m], held)
        point = {"direction": m, "arm": r["arm"], "predicted": pred, "measured": measured}
        point["edit_size"] = float(np.mean(np.abs(held - c[pick, m])) * np.linalg.norm(dirs[m]))
        point["shuffled"] = predicted_changes(gv[:, perm], gpi[:, :, perm], dirs[m], c[pick, m], held)
        if "halves" in r:
            point["halves"] = {"value": r["halves"]["return"], "actions": r["halves"]["tv_distance"]}
        points.append(point)
    pairings = {}
    for key, (metric, text) in PAIRINGS.items():
        res = pairing(points, key, args.bootstrap, args.seed)
        pairings[key] = {**res, "measured": metric, "what": text, "verdict": verdict(res, text)}
    return {"states": len(pick), "pairings": pairings, "points": points, "figure": PREDICTION}


PREDICTION = "prediction.png"


def prediction_figure(points: list[dict], pairings: dict):
    """Predicted against measured effect of every on-data edit, one panel per pairing."""
    fig, axes = subplots(1, len(pairings), figsize=(5 * len(pairings), 4))
    for ax, (key, res) in zip(np.atleast_1d(axes), pairings.items(), strict=True):
        x = [abs(p["predicted"][key]) for p in points]
        y = [abs(p["measured"][key]) for p in points]
        ax.scatter(x, y, s=14, alpha=0.7)
        for p, xi, yi in zip(points, x, y, strict=True):
            ax.annotate(f"{p['direction']}{p['arm'][0]}", (xi, yi), fontsize=6, alpha=0.6)
        ax.set_xlabel(f"predicted |{key}| (gradient x edit size)")
        ax.set_ylabel(f"measured |{res['measured']}|")
        lo, hi = res["ci95"]
        ax.set_title(f"Spearman {res['rho']:+.2f} [{lo:+.2f}, {hi:+.2f}], n = {res['points']}", fontsize=9)
    fig.suptitle("predicted against measured, on-data edits (label: direction, arm initial)", fontsize=9)
    return fig


def _random_baseline(inp: AtlasInputs, track: dict, steps, args: AtlasSettings) -> dict | None:
    """The share of the basis's directions that track some quantity (Holm over the quantities, at lag 0)
    beside the share of ``--random-directions`` random unit directions of its span; and the sweep's share
    that matter beside its random directions', when it ran with them."""
    out = {}
    matter = (inp.sweep or {}).get("claims", {}).get("matter")
    if matter is not None and "random" in matter:
        out["sweep_matter"] = matter
    if args.random_directions:
        random = WithRandom.draw(inp.coords, args.random_directions, args.seed)
        rtrack = tracking(random.project(inp.x), steps, args.lags, args.bootstrap, args.seed)
        k, n = inp.coords.k, args.random_directions
        a = sum(any(t["tracked"] for t in tracked(steps.names, track, m)) for m in range(k))
        b = sum(any(t["tracked"] for t in tracked(steps.names, rtrack, j)) for j in range(n))
        out["tracks"] = {
            "basis": share(a, k),
            "random": share(b, n),
            "basis_minus_random": compare_shares(a, k, b, n),
            "rule": "tracks some quantity at lag 0 (Holm over the quantities), as on the cards",
        }
    return out or None


def _stability(inp: AtlasInputs, lengths: np.ndarray, args: AtlasSettings, progress) -> dict:
    """Each direction's stability under refits (:mod:`proclab.interpret.bases.stability`), on the atlas's
    states; ``{"note": ...}`` when not measured."""
    refit = refitter(inp.coords)
    if args.stability_seeds + args.stability_bootstraps == 0:
        return {"note": "not measured (--stability-seeds 0 --stability-bootstraps 0)"}
    if refit is None:
        return {"note": f"not measured: {inp.coords.name} is not refitted here"}
    return stability(
        lambda h: encode_all(inp.coords, h),
        inp.x,
        lengths,
        refit,
        seeds=args.stability_seeds,
        bootstraps=args.stability_bootstraps,
        seed=args.seed,
        progress=progress,
    )


def _cards(inp: AtlasInputs, c, acts, track, names, moments, looks, prediction, stable) -> dict:

    coords, cards = inp.coords, []
    points = prediction.get("points", [])
    for m in range(coords.k):
        a = {k: v for k, v in acts[m].items() if not k.endswith("_moments")}
        causes = direction_causes(inp.sweep, m, inp.sweep_note)
        steady = stable["directions"][m] if "directions" in stable else None
        if steady is not None and not steady["stable"] and causes.get("significant"):
            causes["claim"] = "withheld: the direction is unstable under refits"
        tracks = tracked(names, track, m)
        look = looks.get(m)
        card = {
            "direction": m,
            "label": f"{coords.label} {m}",
            "activation": {**a, "top": moments[m]["top"], "bottom": moments[m]["bottom"]},
            "tracks": tracks,
            "causes": causes,
            "saliency": None
            if look is None
            else {"image": f"saliency/{look['image']}", "moments": look["moments"]},
            "predicted": [p for p in points if p["direction"] == m],
            "stability": steady,
            "summary": summary_line(causes, tracks, len(inp.recorded.ids)),
        }
        if steady is not None and not steady["stable"]:
            card["summary"] += f"; unstable under refits (index {steady['index']:.2f})"
        card["keys"] = sort_keys(card, names)
        cards.append(card)
    swept = [cd for cd in cards if cd["causes"]["swept"]]
    counts = {
        "directions": coords.k,
        "swept": len(swept),
        "significant": sum(cd["causes"]["significant"] for cd in swept),
        "significant_off_data_only": sum(cd["causes"]["significant_off_data_only"] for cd in swept),
        "unstable": None if "directions" not in stable else len(stable["unstable"]),
        "significant_and_stable": sum(
            cd["causes"]["significant"] and (cd["stability"] is None or cd["stability"]["stable"])
            for cd in swept
        ),
    }
    gradients = {m: look["gradient"] for m, look in looks.items()}
    stability = {k: v for k, v in stable.items() if k != "directions"}
    return {
        "cards": cards,
        "counts": counts,
        "prediction": prediction,
        "gradients": gradients,
        "stability": stability,
    }
