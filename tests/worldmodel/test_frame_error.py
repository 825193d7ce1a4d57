"""Dream quality (the quickstart's stage, wm evaluate's strip): per-step frame errors of the model and of the
two baselines, against a slow reference."""

import numpy as np
import pytest
from PIL import Image

from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore
from proclab.worldmodel.checkpoint import load_world_model
from proclab.worldmodel.frame_error import frame_errors, plot_frame_errors, prediction_strip

STEPS = 3


def _reference(
    store: EpisodeStore, n_init: int, episode_window: list[tuple[int, int]]
) -> dict[str, list[float]]:
    """The baselines' errors, one window at a time with plain numpy: every frame of every level averaged
    for the level mean, the last initial frame repeated, only rows that exist counted."""
    levels = store.episodes["level_seed"]
    frames_of = {e: store.read(e, ["obs"])["obs"].astype(np.float64) / 255 for e in range(store.num_episodes)}
    level_mean = {}
    for level in set(levels.tolist()):
        level_mean[level] = np.concatenate(
            [frames_of[e] for e in range(len(levels)) if levels[e] == level]
        ).mean(0)
    running = {e: np.cumsum(f, 0) for e, f in frames_of.items()}
    others = {e: np.concatenate([frames_of[o] for o in frames_of if o != e]).mean(0) for e in frames_of}
    names = ("repeat last frame", "past mean frame", "other episodes' mean frame", "level mean frame")
    errs = {name: [[] for _ in range(STEPS)] for name in names}
    for e, offset in episode_window:
        frames = frames_of[e]
        last_seen = frames[offset + n_init - 1]
        past = running[e][offset + n_init - 1] / (offset + n_init)  # only the frames the model saw
        for k in range(1, STEPS + 1):
            row = offset + n_init - 1 + k
            if row >= len(frames):
                continue
            errs["repeat last frame"][k - 1].append(((last_seen - frames[row]) ** 2).mean())
            errs["level mean frame"][k - 1].append(((level_mean[levels[e]] - frames[row]) ** 2).mean())
            errs["past mean frame"][k - 1].append(((past - frames[row]) ** 2).mean())
            errs["other episodes' mean frame"][k - 1].append(((others[e] - frames[row]) ** 2).mean())

    def mean_ci(v):
        half = 1.96 * np.std(v, ddof=1) / np.sqrt(len(v))
        return [float(np.mean(v)), [float(np.mean(v) - half), float(np.mean(v) + half)]]

    return {name: [mean_ci(v) for v in per_step] for name, per_step in errs.items()}


def test_baselines_match_a_window_by_window_reference_and_the_model_errors_are_finite(
    trained_run, store, tmp_path
):
    rt = make_runtime("cpu", "fp32")
    wm, agent, ckpt = load_world_model(trained_run, rt)
    data = EpisodeStore(store)
    n_windows = 10_000  # more than exist: every window is used
    result = frame_errors(
        wm, agent, data, ckpt.meta["reward_field"], rt, steps=STEPS, windows=n_windows, batch_size=7
    )
    lengths = data.episodes["length"]
    n = wm.config.num_init_steps  # a window needs its initial frames; its later rows may be past the end
    windows = [(e, off) for e in range(len(lengths)) for off in range(int(lengths[e]) - n + 1)]
    assert result["windows"] == len(windows) and result["steps"] == [1, 2, 3]
    expected = _reference(data, wm.config.num_init_steps, windows)
    for name, values in expected.items():
        np.testing.assert_allclose(result["mse"][name], [m for m, _ in values], rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(result["ci95"][name], [ci for _, ci in values], rtol=1e-5, err_msg=name)
    for name in ("teacher-forced", "imagined", "closed loop"):
        assert all(np.isfinite(v) and 0 <= v <= 1 for v in result["mse"][name]), name
        # every window has every predictor, so the paired difference's mean is the difference of means
        diff = [d["mean"] for d in result["minus_repeat_last"][name]]
        np.testing.assert_allclose(
            diff, np.subtract(result["mse"][name], result["mse"]["repeat last frame"]), rtol=1e-6, atol=1e-12
        )
        assert all(
            lo <= m <= hi
            for (lo, hi), m in zip((d["ci95"] for d in result["minus_repeat_last"][name]), diff, strict=True)
        )
    again = frame_errors(wm, agent, data, ckpt.meta["reward_field"], rt, steps=STEPS, windows=5, seed=3)
    assert again == frame_errors(
        wm, agent, data, ckpt.meta["reward_field"], rt, steps=STEPS, windows=5, seed=3
    )
    assert plot_frame_errors(result, tmp_path / "q.png").stat().st_size > 5000
    strip = prediction_strip(wm, agent, data, ckpt.meta["reward_field"], rt, tmp_path / "s.png", steps=STEPS)
    assert Image.open(strip).size[1] == 2 * 4 * 64 * 2  # 2 windows x (true + 3 predictors) rows, 2x scale


def test_windows_near_a_kind_are_the_first_in_order_with_it_within_the_radius(trained_run, store):
    from proclab.envs import EnvConfig
    from proclab.envs.state import glossary
    from proclab.errors import ProclabError
    from proclab.io.configs import from_dict
    from proclab.record.ground_truth import kind_gaps
    from proclab.worldmodel.frame_error import pick_windows, windows_near
    from proclab.worldmodel.real_game import RealGame

    rt = make_runtime("cpu", "fp32")
    wm, _, ckpt = load_world_model(trained_run, rt)
    data = EpisodeStore(store)
    env = from_dict(EnvConfig, ckpt.meta["agent_env"])
    config, dataset, _ = pick_windows(wm, data, ckpt.meta["reward_field"], 3, 1, 0)
    order = np.random.default_rng(5).permutation(len(dataset))[:30]
    names, game = glossary("coinrun"), RealGame(data, env)
    types, cells = np.array([names.type_of("coin")]), np.array([names.is_cell("coin")])
    gaps = []
    for k in order:  # every window's coin gap at its step 0, one by one
        step = int(dataset.offsets[k]) + config.num_init_steps - 1
        gaps.append(kind_gaps(game.state_at(int(dataset.episode_ids[k]), step), types, cells)[0])
    radius = float(np.median(gaps))
    expected = [int(k) for k, g in zip(order, gaps, strict=True) if g <= radius][:3]
    got = windows_near(data, dataset, config, env, order, "coin", radius, 3)
    assert got.tolist() == sorted(expected) and len(got) == 3
    with pytest.raises(ProclabError, match="kind for coinrun"):
        windows_near(data, dataset, config, env, order, "cheese", 1.0, 3)
    with pytest.raises(ProclabError, match="no window"):
        windows_near(data, dataset, config, env, order, "coin", -100.0, 3)
