"""How much of everything a quickstart does: one :class:`Budget` per ``--budget`` name.

The two training stages get *seconds*, not step counts: the same budget then finishes in the
same wall time on a laptop with native bf16 and on one without (where fp32 runs about 4x
slower), and a faster machine simply trains further. Their step and update counts are caps.
Everything else is a count small enough that its stage takes seconds at ``small``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proclab.errors import unknown_choice


@dataclass(frozen=True)
class Budget:
    """Sizes of every stage (see :data:`BUDGETS`)."""

    preset: str
    """Training preset (``proclab train --preset``)."""
    train_seconds: float | None
    """Wall-clock budget of PPO (None: exactly ``train_steps``)."""
    train_steps: int | None
    """Most environment steps PPO takes (None: the preset's)."""
    eval_episodes: int
    """Episodes per level split, for the agent and for the random agent beside it."""
    render_steps: int
    """Most steps in the agent's video."""
    record_episodes: int
    """Episodes recorded on the training levels (the world model's data, the analyses' real states)."""
    heldout_episodes: int
    """Episodes recorded on held-out levels (the dream-quality measurement)."""
    wm_size: str
    """World-model preset (``proclab wm train --preset``)."""
    wm_seconds: float | None
    """Wall-clock budget of world-model training (None: exactly ``wm_updates``)."""
    wm_updates: int | None
    """Most world-model updates (None: the size's)."""
    wm_sim_steps: int | None
    """Simulated steps per training window (None: the size's); fewer make an update cheaper, so more
    of them fit in ``wm_seconds``, and the dream quality is measured over 5 steps anyway."""
    samples: int
    """Simulated rollouts (``wm sample --n``): the points of the analyses."""
    dream_windows: int
    """Held-out windows the dream quality is measured on."""
    analysis: str
    """Preset of the analyses (``proclab analyze ... --preset``)."""
    overrides: dict[str, dict] = field(default_factory=dict)
    """Per analysis (hidden, env, saliency, behaviours, intervene, atlas, panel), fields replacing the preset's."""


BUDGETS: dict[str, Budget] = {
    # Seconds, for tests: every stage runs, nothing learns.
    "tiny": Budget(
        preset="quickstart",
        train_seconds=None,
        train_steps=1024,
        eval_episodes=2,
        render_steps=40,
        record_episodes=3,
        heldout_episodes=2,
        wm_size="tiny",
        wm_seconds=None,
        wm_updates=2,
        wm_sim_steps=None,
        samples=12,
        dream_windows=4,
        analysis="small",
        overrides={
            "hidden": {"clusters": 2, "nmf": 2, "n_ics": 2, "fit_points": 500, "perplexity": 3.0},
            "env": {"pcs": 4, "clusters": 2, "fit_points": 500, "perplexity": 3.0},
            "saliency": {
                "ids": "0:2",
                "noise": 1,
                "strips": 1,
                "videos": 1,
                "target": ("value", "action", "ic:0-1"),
            },
            "behaviours": {
                "clusters": 2,
                "pcs": 4,
                "env_pcs": 2,
                "perplexity": 3.0,
                "videos": 2,
                "stability": False,
            },
            "panel": {"samples": 12, "real": 2, "background": 100},
            "intervene": {"levels": 2, "rows": 16, "permutations": 100, "bootstrap": 100},
            "atlas": {"bootstrap": 50, "moments": 1, "saliency_moments": 1, "noise": 1, "predict_steps": 50},
        },
    ),
    # The default: the whole pipeline in under 10 minutes on 2 CPU cores, with or without bf16.
    "small": Budget(
        preset="quickstart",
        train_seconds=160,
        train_steps=2_000_000,
        eval_episodes=100,
        render_steps=1000,
        record_episodes=60,
        heldout_episodes=8,
        wm_size="cpu",
        wm_seconds=110,
        wm_updates=100_000,
        wm_sim_steps=8,
        samples=300,
        dream_windows=64,
        analysis="small",
        overrides={
            "saliency": {"ids": "0:4", "strips": 4, "videos": 2},
            "behaviours": {"videos": 8},
            "panel": {"samples": 300, "real": 20},
            "intervene": {"levels": 2},
        },
    ),
    # About an hour on a CPU: the agent and the world model train long enough to be good.
    "medium": Budget(
        preset="quickstart",
        train_seconds=1800,
        train_steps=25_000_000,
        eval_episodes=100,
        render_steps=2000,
        record_episodes=300,
        heldout_episodes=32,
        wm_size="cpu",
        wm_seconds=1200,
        wm_updates=1_000_000,
        wm_sim_steps=None,
        samples=1000,
        dream_windows=256,
        analysis="small",
        overrides={"saliency": {"ids": "0:16"}, "panel": {"samples": 1000}, "intervene": {"levels": 100}},
    ),
    # interpreting-rl-behavior's scale (days on a GPU): its agent, 4000 episodes, its world model
    # and analyses at their published sizes.
    "paper": Budget(
        preset="hard-rec",
        train_seconds=None,
        train_steps=None,
        eval_episodes=500,
        render_steps=2000,
        record_episodes=4000,
        heldout_episodes=256,
        wm_size="paper",
        wm_seconds=None,
        wm_updates=None,
        wm_sim_steps=None,
        samples=4000,
        dream_windows=1024,
        analysis="paper",
        overrides={"panel": {"samples": 4000}, "intervene": {"levels": 1000}},
    ),
}


def budget(name: str) -> Budget:
    """The budget called ``name``; a one-line error naming the valid ones otherwise."""
    if name not in BUDGETS:
        raise unknown_choice("budget", name, BUDGETS)
    return BUDGETS[name]
