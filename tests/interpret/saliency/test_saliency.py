"""Saliency: equal to a direct autograd of the simulation, SmoothGrad, env-grads, projections, replay checks."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from proclab.cli import main as cli
from proclab.errors import ProclabError
from proclab.interpret.bases.pca_ica import Basis, BasisConfig
from proclab.interpret.saliency.real_frames import WindowTarget, attribute, load_window
from proclab.interpret.saliency.targets import GROUPS, parse_targets
from proclab.interpret.saliency.world_model import (
    SampleSettings,
    check_reproduces,
    noisy_copies,
    saliency_batch,
)
from proclab.interpret.workspace.folder import Workspace
from proclab.models import capture
from proclab.models.loading import freeze, load_agent
from proclab.run.runtime import make_runtime
from proclab.store import EpisodeStore
from proclab.store.state_codec import StateCodec
from proclab.worldmodel.simulate import dreamed

STEPS = 6


@pytest.fixture(scope="module")
def basis():
    x = np.random.default_rng(0).normal(size=(400, 16)) @ np.random.default_rng(1).normal(size=(16, 16))
    return Basis.fit(x.astype(np.float32), BasisConfig(n_ics=4), {"activation": "core.0.h"})


def direct(model, bottleneck, step, env_grads=True, detach_start=False):
    """The obvious reference: one simulation, each gradient taken by hand for value and taken-action log-prob."""
    wm, agent = model
    b = bottleneck.clone().requires_grad_(True)
    with capture(agent, ["core.0.hook_h"]) as acts:
        traj = dreamed(wm, agent, b, STEPS, env_grads=env_grads, detach_start=detach_start)
    states = acts.calls("core.0.hook_h")
    logp = traj.logits[step].log_softmax(-1)
    taken = traj.action[step].argmax(-1)
    out = {}
    for name, y in (("value", traj.value[step]), ("action", logp.gather(-1, taken[:, None])[:, 0])):
        g = torch.autograd.grad(
            y.sum(),
            [b, *traj.per_step["frame"], *traj.per_step["env_h"], *states],
            retain_graph=True,
            allow_unused=True,
        )
        g = [torch.zeros(1) if x is None else x for x in g]
        out[name] = {
            "bottleneck": g[0],
            "frame": torch.stack(g[1 : 1 + STEPS], 1),
            "env_h": torch.stack(g[1 + STEPS : 1 + 2 * STEPS], 1),
            "state": torch.stack(g[1 + 2 * STEPS :], 1),
        }
    return out


def test_bottleneck_gradients_include_the_predicted_agent_state_and_first_action(model, bottlenecks):
    """The bottleneck also feeds the agent's initial state and first action: saliency follows those paths
    (training detaches them, so that the converters' losses do not shape the bottleneck)."""
    got = saliency_batch(*model, bottlenecks, parse_targets(["value"]), 3, STEPS)
    detached = direct(model, bottlenecks, 3, detach_start=True)["value"]["bottleneck"].numpy()
    assert not np.allclose(got.grads["value"]["bottleneck"], detached, rtol=1e-3, atol=1e-8)


def test_world_model_saliency_equals_direct_autograd_of_the_simulation(model, bottlenecks):
    wm, agent = model
    got = saliency_batch(wm, agent, bottlenecks, parse_targets(["value", "action"]), 3, STEPS)
    ref = direct(model, bottlenecks, 3)
    for name in ("value", "action"):
        for part in ("bottleneck", "frame", "env_h", "state"):
            np.testing.assert_allclose(got.grads[name][part], ref[name][part].numpy(), rtol=1e-5, atol=1e-7)
        assert (
            np.abs(got.grads[name]["frame"][:, :4]).sum() > 0
        )  # gradient reaches the frames up to the target
        assert np.abs(got.grads[name]["frame"][:, 4:]).sum() == 0  # and none after it


def test_noise_zero_is_the_plain_gradient_and_noise_averages_copies(model, bottlenecks):
    wm, agent = model
    targets = parse_targets(["value"])
    plain = saliency_batch(wm, agent, bottlenecks, targets, 3, STEPS).grads["value"]
    zero_sigma = saliency_batch(wm, agent, bottlenecks, targets, 3, STEPS, noise=3, sigma=0.0).grads["value"]
    noisy = saliency_batch(
        wm,
        agent,
        bottlenecks,
        targets,
        3,
        STEPS,
        noise=3,
        sigma=0.3,
        generator=torch.Generator().manual_seed(0),
    ).grads["value"]
    # Equal up to float rounding, which differs between a batch of 3 samples and one of 3 x 4 copies. The
    # simulation has kinks (the agent's ReLUs, the decoder's leaky ReLUs); an input within that rounding of
    # one takes a different side in the two batches, and a patch of one sample's gradient differs (seen on
    # the cpu preset's forms: one sample, steps 0-1 of the frame and env_h parts, 0.6 % of the frame's
    # elements, 0.2 % of its norm; 2.3 % of the frame part's norm with AVX2 arithmetic on another tiny model).
    # So the test bounds each part's relative difference in norm at 5 %: a wrong average, an ignored sigma or
    # mixed-up samples move it by tens of percent.
    for part in plain:
        gap = np.linalg.norm(zero_sigma[part] - plain[part]) / np.linalg.norm(plain[part])
        assert gap < 5e-2, (part, gap)
    assert not np.allclose(noisy["bottleneck"], plain["bottleneck"])
    copies = noisy_copies(bottlenecks, 3, 0.3, torch.Generator().manual_seed(0)).view(3, 4, -1)
    assert torch.equal(copies[:, 0], bottlenecks)
    np.testing.assert_allclose(copies.norm(dim=-1).numpy(), 1, rtol=1e-6)
    # the average over copies, by hand: each copy is its own sample of the plain gradient
    per_copy = saliency_batch(wm, agent, copies.reshape(12, -1), targets, 3, STEPS).grads["value"]
    np.testing.assert_allclose(
        noisy["frame"],
        per_copy["frame"].reshape(3, 4, *noisy["frame"].shape[1:]).mean(1),
        rtol=1e-5,
        atol=1e-9,
    )


def test_env_grads_off_changes_gradients_but_not_values(model, bottlenecks):
    wm, agent = model
    targets = parse_targets(["value", "action"])
    on = saliency_batch(wm, agent, bottlenecks, targets, 4, STEPS, env_grads=True)
    off = saliency_batch(wm, agent, bottlenecks, targets, 4, STEPS, env_grads=False)
    np.testing.assert_array_equal(on.rollout.value, off.rollout.value)
    np.testing.assert_array_equal(on.rollout.obs, off.rollout.obs)
    a, b = on.grads["value"]["env_h"][:, :3], off.grads["value"]["env_h"][:, :3]
    # beyond float noise (fp32's epsilon is 1.2e-7): the path is weak in a tiny model, and weaker still
    # (3e-6 of the gradient) under the cpu preset's copy gate, which passes 0.7% of the generated pixels
    assert np.abs(a - b).max() > 1e-6 * np.abs(a).max()
    ref_off = direct(model, bottlenecks, 4, env_grads=False)
    np.testing.assert_allclose(
        off.grads["value"]["frame"], ref_off["value"]["frame"].numpy(), rtol=1e-5, atol=1e-7
    )
    # at step 0 no action has been fed back yet: its gradients do not depend on the setting
    on0 = saliency_batch(wm, agent, bottlenecks, targets, 0, STEPS, env_grads=True).grads["value"]
    off0 = saliency_batch(wm, agent, bottlenecks, targets, 0, STEPS, env_grads=False).grads["value"]
    for part in on0:
        np.testing.assert_allclose(on0[part], off0[part], rtol=1e-6, atol=1e-9)


def test_ic_targets_and_projected_gradients(model, bottlenecks, basis):
    wm, agent = model
    targets = parse_targets(["ic:0-3", "pc:1"])
    res = saliency_batch(wm, agent, bottlenecks, targets, 3, STEPS, basis=basis, basis_source="core.0.h")
    for j in range(4):
        g = res.grads[f"ic:{j}"]
        np.testing.assert_array_equal(g["basis"], g["state"])  # the basis activation is the state itself
        projected = basis.project_gradient(g["basis"][:, 3], "ica")
        np.testing.assert_allclose(
            projected, np.eye(4)[j].repeat(3).reshape(4, 3).T, atol=1e-5
        )  # dIC_j/dIC_i = delta
    with torch.no_grad():
        traj = dreamed(wm, agent, bottlenecks, STEPS)
    ics = basis.to_ics(traj.agent_state[3].double().numpy())
    np.testing.assert_allclose([res.targets[f"ic:{j}"] for j in range(4)], ics.T, rtol=1e-4, atol=1e-5)


def test_target_grammar():
    specs = [
        t.spec
        for t in parse_targets(["value", "ic:0-2", "action:up-right", "action:7", "group:left", "ic:1"])
    ]
    assert specs == ["value", "ic:0", "ic:1", "ic:2", "action:up-right", "action:right", "group:left"]
    assert GROUPS["left"] == (0, 1, 2) and GROUPS["up"] == (2, 5, 8)
    for bad, msg in (
        ("valeu", "unknown saliency target"),
        ("ic:3-1", "empty range"),
        ("action:jump", "unknown action"),
        ("group:north", "unknown action group"),
    ):
        with pytest.raises(ProclabError, match=msg):
            parse_targets([bad])


def test_replay_check_names_the_setting(samples):
    settings = SampleSettings.of(EpisodeStore(samples))
    assert settings.modal and settings.greedy and settings.precision == "fp32"
    frames = np.zeros((2, 3, 3, 8, 8), np.uint8)
    check_reproduces(frames, frames + 1, [4, 5], settings, settings.step)  # one grey level: summation order
    moved = frames.copy()
    moved[1, 2, 0, 0, 0] = 9
    with pytest.raises(ProclabError, match=r"sample 5 differs .* from step 2 on .* checkpoint step"):
        check_reproduces(frames, moved, [4, 5], settings, settings.step + 1)
    with pytest.raises(ProclabError, match="precision: samples simulated in bf16"):
        check_reproduces(frames, moved, [4, 5], replace(settings, precision="bf16"), settings.step)
    with pytest.raises(ProclabError, match="--no-modal"):
        replace(settings, modal=False).check_replayable()


def test_real_gradients_equal_central_finite_differences(wm_run):
    from proclab.worldmodel.checkpoint import load_checkpoint

    ckpt = load_checkpoint(wm_run, kind="world_model")
    store = EpisodeStore(ckpt.meta["data"])
    agent_path = store.recordings().popitem()[1]["recording"]["checkpoint"]
    agent, _, _ = load_agent(agent_path, make_runtime("cpu", "fp32", 1, channels_last=False))
    agent = freeze(agent).double()
    codec = StateCodec(agent.state_shapes())
    frames, state, taken, _ = load_window(store, 0, 2, 4, codec, "cpu")
    # a generic point: recorded frames have flat regions, where max-pool ties make the function non-smooth
    frames = (frames.double() + 0.01 * torch.rand(frames.shape, generator=torch.Generator().manual_seed(0)))[
        None
    ]
    for spec in ("value", "action", "group:right"):
        model = WindowTarget(
            agent,
            parse_targets([spec])[0],
            2,
            {k: v.double()[None] for k, v in state.items()},
            taken[None],
            None,
        )
        grad = attribute(model, frames.clone(), "gradient", 0, 0.0)[0]
        rng = np.random.default_rng(0)
        for _ in range(6):
            t, c, y, x = (
                int(rng.integers(0, 3)),
                int(rng.integers(0, 3)),
                int(rng.integers(0, 64)),
                int(rng.integers(0, 64)),
            )
            eps = 1e-6
            up, down = frames.clone(), frames.clone()
            up[0, t, c, y, x] += eps
            down[0, t, c, y, x] -= eps
            with torch.no_grad():
                fd = (model(up) - model(down)).item() / (2 * eps)
            assert fd == pytest.approx(grad[t, c, y, x].item(), rel=1e-5, abs=1e-9)
        assert grad[3].abs().sum() == 0 and grad[:3].abs().sum() > 0


def test_saliency_command(samples, tmp_path, basis, capsys):
    (tmp_path / "analysis").mkdir()
    ws = Workspace.open(tmp_path / "analysis")
    ws.require_inputs(activation="core.0.h")
    basis.save(ws.basis_path)
    ws.record_command("hidden", {}, [], 0.0)
    out = tmp_path / "analysis"
    cli(
        [
            "analyze",
            "saliency",
            "--out",
            str(out),
            "--samples",
            str(samples),
            "--ids",
            "0:2,4",
            "--target",
            "value",
            "--target",
            "ic:0-1",
            "--step",
            "2",
            "--noise",
            "1",
            "--env-grads",
            "both",
            "--batch",
            "2",
            "--strips",
            "1",
            "--videos",
            "1",
            "--device",
            "cpu",
        ]
    )
    assert "outputs in" in capsys.readouterr().out
    sal = EpisodeStore(out / "saliency" / "store.zarr")
    src = EpisodeStore(samples)
    assert sal.num_episodes == 6 and sorted(sal.episodes["sample"].tolist()) == [0, 0, 1, 1, 4, 4]
    for i in range(sal.num_episodes):
        ep = sal.episode(i)
        # replays the sample: the same frames up to the rounding to 8 bits of a float recomputed in another
        # batch (a value within that rounding of a half level lands on the other side: 1 pixel in 73,728 seen)
        diff = np.abs(ep["obs"].astype(int) - src.read(int(ep["sample"]), ["obs"])["obs"].astype(int))
        assert diff.max() <= 1 and (diff > 0).mean() < 1e-4, (diff.max(), (diff > 0).mean())
        for key in ("value", "ic_0", "ic_1"):
            np.testing.assert_allclose(
                ep[f"grad/{key}/ic"],
                basis.project_gradient(ep[f"grad/{key}/state"], "ica"),
                rtol=1e-5,
                atol=1e-8,
            )
    summary = __import__("json").loads((out / "saliency" / "summary.json").read_text())
    before = summary["targets"]["value"]["env_grads"]["mass_before_target"]
    shares = []  # recomputed from the stored frame gradients of the env-grads episodes
    for i in range(sal.num_episodes):
        if sal.episodes["env_grads"][i]:
            mass = np.abs(sal.episode(i)["grad/value/frame"]).reshape(STEPS, -1).sum(1)
            shares.append(mass[:2].sum() / mass.sum())
    assert before["uniform"] == pytest.approx(2 / 3) and before["samples"] == len(shares) == 3
    assert before["mean"] == pytest.approx(np.mean(shares), rel=1e-4)
    assert before["ci95"][0] <= before["mean"] <= before["ci95"][1]
    assert set(summary["targets"]) == {"value", "ic:0", "ic:1"}
    assert "ratio_with_without" in summary["targets"]["value"]
    assert len(summary["targets"]["value"]["env_grads"]["mean_abs_grad"]["frame"]) == STEPS
    assert (out / "saliency" / "strips" / "sample_00000_value.png").is_file()
    assert (out / "saliency" / "videos" / "sample_00000_no-env-grads.mp4").is_file()
    with pytest.raises(SystemExit):
        cli(
            [
                "analyze",
                "saliency",
                "--out",
                str(out),
                "--samples",
                str(samples),
                "--target",
                "valeu",
                "--device",
                "cpu",
            ]
        )


def test_real_saliency_command(wm_run, tmp_path):
    from proclab.worldmodel.checkpoint import load_checkpoint

    data = load_checkpoint(wm_run, kind="world_model").meta["data"]
    out = tmp_path / "real"
    for method in (
        "gradient",
        "smoothgrad",
        "integrated-gradients",
        "gradient",
    ):  # a re-run replaces its store
        cli(
            [
                "analyze",
                "saliency",
                "--out",
                str(out),
                "--real",
                "--data",
                str(data),
                "--episodes",
                "0:2",
                "--window",
                "4",
                "--step",
                "2",
                "--method",
                method,
                "--noise",
                "2",
                "--name",
                method,
                "--strips",
                "1",
                "--videos",
                "1",
                "--device",
                "cpu",
            ]
        )
        store = EpisodeStore(out / method / "store.zarr")
        assert store.num_episodes == 2
        grad = store.read(0, ["grad/value/frame"])["grad/value/frame"]
        assert np.abs(grad[:3]).sum() > 0 and np.abs(grad[3]).sum() == 0
    assert (out / "gradient" / "videos" / "episode_00000.mp4").is_file()


def test_against_uniform_matches_slow_reference():
    """The share before the target against uniform: bootstrap interval by an explicit loop over the
    same resamples, the sign-flip p-value against exact enumeration of all 2^n sign patterns, Holm by
    hand, and verdicts on planted shares above, below and at the uniform share."""
    from itertools import product

    from proclab.interpret.saliency.command import against_uniform
    from proclab.stats.bootstrap import resamples

    rng = np.random.default_rng(3)
    uniform = 0.8
    shares = [
        list(0.9 + 0.02 * rng.standard_normal(9)),  # above
        list(0.7 + 0.02 * rng.standard_normal(9)),  # below
        list(uniform + 0.05 * rng.standard_normal(9)),  # at uniform
    ]
    reps = 20000
    out = against_uniform(shares, uniform, reps=reps, seed=5)
    assert [o["verdict"] for o in out] == ["above uniform", "below uniform", "not distinguishable"]
    raw_p = []
    for i, (x, o) in enumerate(zip(shares, out, strict=True)):
        x = np.asarray(x)
        assert o["mean"] == pytest.approx(x.mean()) and o["excess"] == pytest.approx(x.mean() - uniform)
        idx = resamples(len(x), reps, 5 + i)
        boot = np.array([np.mean(x[row]) for row in idx])
        assert o["ci95"] == pytest.approx(list(np.percentile(boot, [2.5, 97.5])))
        d = x - uniform
        flips = np.array([np.mean(np.array(s) * d) for s in product((1, -1), repeat=len(d))])
        exact = np.mean(np.abs(flips) >= abs(d.mean()) - 1e-12)
        raw_p.append(exact)
    order = np.argsort(raw_p)  # Monte Carlo p-values of 20,000 draws against the exact ones, Holm by hand
    holm = np.maximum.accumulate([min(1.0, (len(raw_p) - r) * raw_p[k]) for r, k in enumerate(order)])
    for r, k in enumerate(order):
        assert out[k]["p_holm"] == pytest.approx(holm[r], abs=0.01)
