"""The cpu preset's pieces: the shifted copy of the previous frame, the gate, the changed-pixel loss, gradients."""

import itertools
import math
from dataclasses import replace

import pytest
import torch

from proclab.errors import ProclabError
from proclab.models import AgentConfig, build_agent
from proclab.models.loading import freeze
from proclab.worldmodel.batch import synthetic_batch
from proclab.worldmodel.camera import measured_shift
from proclab.worldmodel.config import LossWeights, WorldModelConfig, wm_size
from proclab.worldmodel.distributions import clamp_st
from proclab.worldmodel.layers import shift_frames
from proclab.worldmodel.losses import shift_labels, step_terms, world_model_loss
from proclab.worldmodel.model import WorldModel
from proclab.worldmodel.simulate import (
    dreamed,
    open_loop_pass,
    random_bottlenecks,
    shift_before,
    teacher_forced,
)
from support import TINY_AGENT

COPY = replace(wm_size("tiny").model, decoder_copy=True, camera_shift=3.0)
MOTION = replace(COPY, camera_motion=True)
REFINE = replace(MOTION, frame_refiner=True)


def models(seed: int = 0, config: WorldModelConfig = COPY):
    torch.manual_seed(seed)
    agent = freeze(build_agent(AgentConfig(core="gru", rnn_size=16, head_init="torch", **TINY_AGENT)))
    wm = WorldModel(config, 15, agent.state_shapes())
    if config.camera_motion:  # a model that has learnt to move the camera
        torch.nn.init.normal_(wm.motion.out[-1].weight, std=0.5)
    else:
        torch.nn.init.normal_(wm.shift.weight, std=0.5)
    if config.frame_refiner:  # ... and to draw on its copy
        torch.nn.init.normal_(wm.refiner.out.weight, std=0.5)
    return wm, agent


def test_an_integer_shift_moves_every_pixel_and_repeats_the_edges():
    x = torch.rand(2, 3, 8, 8)
    out = shift_frames(x, torch.tensor([[2.0, -1.0], [0.0, 3.0]]))
    for b, (dx, dy) in enumerate([(2, -1), (0, 3)]):
        for c, y, i in itertools.product(range(3), range(8), range(8)):
            src_y, src_x = min(max(y - dy, 0), 7), min(max(i - dx, 0), 7)
            assert out[b, c, y, i] == pytest.approx(float(x[b, c, src_y, src_x]), abs=1e-6)


def test_the_decoder_gates_between_the_shifted_previous_frame_and_a_generated_one():
    wm, _ = models()
    feat = torch.randn(4, COPY.deter + COPY.stoch * COPY.classes)
    prev = torch.rand(4, 3, 64, 64)
    out = wm.decoder(feat)
    gate = torch.sigmoid(out[:, 3:])
    moved = shift_frames(prev, 3.0 * torch.tanh(wm.shift(feat)))
    torch.testing.assert_close(wm.decode(feat, prev), gate * moved + (1 - gate) * out[:, :3])
    torch.testing.assert_close(wm.decode(feat), out[:, :3])  # nothing to copy: generated
    with pytest.raises(ProclabError, match="decoder_copy"):
        WorldModelConfig(camera_shift=2.0)


FORMS = pytest.mark.parametrize(
    "config", [COPY, MOTION, REFINE], ids=["state-shift", "camera-motion", "refiner"]
)


@FORMS
def test_batched_decoding_equals_the_closed_loop_along_the_copy_path(config):
    wm, agent = models(config=config)
    with torch.no_grad():
        bottleneck = random_bottlenecks(3, COPY.bottleneck, torch.Generator().manual_seed(0))
        before = torch.rand(3, 3, 64, 64)
        moved = torch.tensor([[1.0, -2.0], [0.0, 0.5], [-2.5, 3.0]])
        start = replace(wm.start(bottleneck, modal=True), frame=before, shift=moved)
        closed = wm.simulate(agent, start, 4, modal=True)
        actions = torch.cat([start.prev_action[None], closed.action[:-1]])
        opened = wm.simulate(agent, start, 4, actions=actions, modal=True)
        torch.testing.assert_close(opened.frame, closed.frame, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(opened.shift, closed.shift, atol=1e-5, rtol=1e-4)
        # by hand: each step copies the frame before it (a motion model: moved on from the shift before)
        feat = torch.cat([closed.env_h, closed.env_z], -1)
        prev, shift = before, moved
        for k in range(4):
            out = wm.decoder(feat[k])
            if config.camera_motion:
                x = wm.motion.frame(wm.motion.convs(prev).flatten(1)) + wm.motion.state(
                    feat[k][:, : config.deter]
                )
                change = wm.motion.out(torch.cat([x, actions[k], shift / 3.0], -1))
                shift = (shift + change).clamp(-3.0, 3.0)
            else:
                shift = 3.0 * torch.tanh(wm.shift(feat[k]))
            if config.frame_refiner:
                moved = shift_frames(prev, shift)
                image = moved + wm.refiner(moved, prev, feat[k][:, : config.deter], shift)
            else:
                gate = torch.sigmoid(out[:, 3:])
                image = gate * shift_frames(prev, shift) + (1 - gate) * out[:, :3]
            torch.testing.assert_close(closed.image[k], image, atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(closed.shift[k], shift, atol=1e-5, rtol=1e-4)
            prev = clamp_st(image)


def test_an_untrained_motion_model_carries_the_last_move_on():
    wm, agent = models(config=MOTION)
    torch.nn.init.zeros_(wm.motion.out[-1].weight)  # as built
    with torch.no_grad():
        start = replace(
            wm.start(random_bottlenecks(2, COPY.bottleneck), modal=True),
            frame=torch.rand(2, 3, 64, 64),
            shift=torch.tensor([[1.5, -0.5], [-4.0, 2.0]]),
        )
        traj = wm.simulate(agent, start, 3, modal=True)
    expected = torch.tensor([[1.5, -0.5], [-3.0, 2.0]])  # clamped to the largest shift, 3 pixels
    for k in range(3):
        torch.testing.assert_close(traj.shift[k], expected)
    with pytest.raises(ProclabError, match="camera_motion"):
        WorldModelConfig(camera_motion=True)


def test_the_shift_before_step_0_is_measured_between_the_true_frames_before_it():
    wm, _agent = models(config=replace(MOTION, num_init_steps=3))
    batch = synthetic_batch(replace(MOTION, num_init_steps=3, num_sim_steps=2), 16, 2)
    first = (textured(2, 3, 64) * 255).to(torch.uint8)
    batch.init_frames[0] = first
    batch.init_frames[1] = (
        shift_frames(first.float(), torch.tensor([[2.0, 1.0], [-1.0, 0.0]])).round().to(torch.uint8)
    )
    got = shift_before(wm, batch)
    torch.testing.assert_close(got, torch.tensor([[2.0, 1.0], [-1.0, 0.0]]), atol=0.15, rtol=0)
    assert shift_before(models()[0], batch) is None  # a model without camera motion has no use for it


def test_changed_pixel_loss_against_a_pixel_by_pixel_sum():
    config = replace(COPY, num_sim_steps=2)
    batch = synthetic_batch(config, 0, 1)
    batch.frames[1] = batch.frames[0]
    batch.frames[1, 0, :, 3:5, 7:9] = 255 - batch.frames[1, 0, :, 3:5, 7:9]  # step 1: 4 pixels change
    image = torch.rand(2, 1, 3, 64, 64)
    traj = type("T", (), {})()
    traj.image, traj.reward, traj.done_logit = image, torch.zeros(2, 1), torch.zeros(2, 1)
    traj.agent_state, traj.env_h, traj.post_logits = torch.zeros(2, 1, 0), torch.zeros(2, 1, 4), None
    traj.start, traj.shift = type("S", (), {"env_h": torch.zeros(1, 4)})(), None
    w = LossWeights(changed_pixels=10.0, change_threshold=0.05)
    got = step_terms(traj, batch, w)["image"]
    true = torch.cat([batch.init_frames[-2:-1], batch.frames]).double() / 255
    for k in range(2):
        total = 0.0
        for y, x in itertools.product(range(64), range(64)):
            moved = max(abs(float(true[k + 1, 0, c, y, x] - true[k, 0, c, y, x])) for c in range(3)) > 0.05
            err = sum((float(image[k, 0, c, y, x]) - float(true[k + 1, 0, c, y, x])) ** 2 for c in range(3))
            total += 0.5 * err * (11 if moved else 1)
        assert float(got[k, 0]) == pytest.approx(total, rel=1e-5)
    plain = step_terms(traj, batch)["image"]
    assert float(plain[1, 0]) < float(got[1, 0]) < float(plain[1, 0]) * 1.1  # 4 of 4,096 pixels weigh more


@FORMS
def test_gradients_reach_the_copied_frame_and_every_parameter(config):
    wm, agent = models(config=config)
    bottleneck = random_bottlenecks(2, COPY.bottleneck, torch.Generator().manual_seed(1)).requires_grad_(True)
    before = torch.rand(2, 3, 64, 64, requires_grad=True)
    traj = dreamed(wm, agent, bottleneck, 4, start_frame=before)
    g_b, g_f = torch.autograd.grad(traj.value[3].sum(), [bottleneck, before])
    assert (
        g_b.abs().sum() > 0 and g_f.abs().sum() > 0
    )  # the agent's value at step 3 depends on the copied frame
    batch = synthetic_batch(config, wm.codec.width, 3)
    start, traj = teacher_forced(wm, agent, batch)
    loss, _ = world_model_loss(start, traj, batch, LossWeights(changed_pixels=10.0))
    loss.backward()
    assert [n for n, p in wm.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0] == []


def test_the_cpu_preset_trains_and_loads_back(make_config):
    from proclab.run.runtime import make_runtime
    from proclab.worldmodel.checkpoint import load_world_model
    from proclab.worldmodel.trainer import train_world_model

    cpu = wm_size("cpu")
    assert cpu.model.decoder_copy and cpu.model.camera_shift > 0 and cpu.loss.changed_pixels > 0
    assert wm_size("paper").model.decoder_copy is False and wm_size("paper").loss.changed_pixels == 0
    config = make_config(model=COPY, loss=cpu.loss, total_updates=2)
    run = train_world_model(config.data, config, progress=False).run_dir
    wm, _, _ = load_world_model(run, make_runtime("cpu", "fp32"))
    assert wm.config == COPY and wm.shift is not None


def test_teacher_forcing_also_trains_the_first_frame_without_a_copy():
    """A dream from a bottleneck has no frame to copy at step 0: that decoding is trained too, weighted as
    the image term."""
    wm, agent = models()
    batch = synthetic_batch(COPY, wm.codec.width, 2)
    start, traj = teacher_forced(wm, agent, batch, modal=True)
    alone = wm.decode(torch.cat([traj.env_h[0], traj.env_z[0]], -1))
    torch.testing.assert_close(traj.image_alone, alone)
    assert not torch.allclose(traj.image_alone, traj.image[0])  # with the copy, step 0 differs
    w = LossWeights(image=2.0)
    loss, metrics = world_model_loss(start, traj, batch, w)
    ref = 0.5 * (alone.detach().double() - batch.frames[0].double() / 255).pow(2).sum((1, 2, 3)).mean()
    assert float(metrics["losses/image_alone"]) == pytest.approx(float(ref), rel=1e-5)
    traj.image_alone = None
    without, _ = world_model_loss(start, traj, batch, w)
    assert float((loss - without).detach()) == pytest.approx(2 * float(ref), rel=1e-4)


def brute_force_shift(prev: torch.Tensor, cur: torch.Tensor, radius: int) -> tuple[int, int]:
    """The whole shift within ``radius`` whose translated grey ``prev`` (edges repeated) is closest to ``cur``:
    every shift tried, pixel by pixel."""
    p, c = prev.double().mean(0), cur.double().mean(0)
    H, W = c.shape
    best, arg = float("inf"), (0, 0)
    for dx, dy in itertools.product(range(-radius, radius + 1), repeat=2):
        err = 0.0
        for y, x in itertools.product(range(H), range(W)):
            err += float(p[min(max(y - dy, 0), H - 1), min(max(x - dx, 0), W - 1)] - c[y, x]) ** 2
        if err < best - 1e-12:
            best, arg = err, (dx, dy)
    return arg


def textured(n: int, seed: int, size: int = 24) -> torch.Tensor:
    """Smooth random frames (a few blurred blobs): an unambiguous best shift, like a scene of shapes."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 3, size // 4, size // 4, generator=g)
    return torch.nn.functional.interpolate(x, size=(size, size), mode="bicubic", align_corners=False)


def test_the_measured_shift_is_the_brute_force_best_whole_shift_refined():
    prev = textured(6, 0)
    truth = torch.tensor([[2.0, -3.0], [-4.0, 1.0], [0.0, 0.0], [3.0, 4.0], [-1.0, -4.0], [1.0, 2.0]])
    cur = shift_frames(prev, truth)
    got = measured_shift(prev, cur, 4.0)
    for i in range(len(prev)):
        assert tuple(got[i].round().int().tolist()) == brute_force_shift(prev[i], cur[i], 4)
    torch.testing.assert_close(got, truth, atol=0.05, rtol=0)
    sub = torch.tensor([[1.3, -0.6], [-2.25, 2.5]])  # a sub-pixel move is refined within a tenth of a pixel
    got = measured_shift(prev[:2], shift_frames(prev[:2], sub), 4.0)
    assert (got - sub).abs().max() < 0.1


def test_the_shift_labels_pair_each_true_frame_with_the_one_before():
    config = replace(COPY, num_sim_steps=3)
    batch = synthetic_batch(config, 0, 2)
    frames = (textured(2, 1, 64) * 255).to(torch.uint8)
    moves = [torch.tensor([[1.0, 0.0], [0.0, -2.0]]), torch.tensor([[2.0, 1.0], [-1.0, 0.0]])]
    batch.init_frames[-2] = frames
    seq = [frames.float()]
    for k in range(3):
        seq.append(shift_frames(seq[-1], moves[k % 2]))
        batch.frames[k] = seq[-1].round().clamp(0, 255).to(torch.uint8)
    labels = shift_labels(batch, 3.0)
    for k in range(3):
        torch.testing.assert_close(labels[k], moves[k % 2], atol=0.15, rtol=0)


def test_a_positive_gate_bias_starts_the_decoder_copying():
    wm, agent = models()
    biased = WorldModel(replace(COPY, copy_gate_bias=8.0), 15, agent.state_shapes())
    biased.load_state_dict(wm.state_dict())
    feat = torch.randn(4, COPY.deter + COPY.stoch * COPY.classes)
    prev = torch.rand(4, 3, 64, 64)
    out = wm.decoder(feat)
    gate = torch.sigmoid(out[:, 3:] + 8.0)
    moved = shift_frames(prev, 3.0 * torch.tanh(wm.shift(feat)))
    torch.testing.assert_close(biased.decode(feat, prev), gate * moved + (1 - gate) * out[:, :3])
    assert float(gate.detach().min()) > 0.99
    with pytest.raises(ProclabError, match="copy_gate_bias"):
        WorldModelConfig(copy_gate_bias=1.0)


def test_the_shift_and_open_loop_terms_add_what_they_say():
    wm, agent = models()
    config = replace(COPY, num_sim_steps=3)
    batch = synthetic_batch(config, 16, 3)
    torch.manual_seed(4)
    start, traj = teacher_forced(wm, agent, batch)
    target = torch.randn(3, 3, 2)
    w = LossWeights(shift=2.0, open_loop=0.5, changed_pixels=3.0)
    plain, _ = world_model_loss(start, traj, batch, replace(w, shift=0.0, open_loop=0.0))
    with_shift, metrics = world_model_loss(start, traj, batch, w, shift_target=target)
    mask = batch.frame_mask
    by_hand = sum(
        float(((traj.shift[k, b].detach() - target[k, b]) ** 2).sum()) * float(mask[k, b])
        for k in range(3)
        for b in range(3)
    )
    assert float(metrics["losses/shift"]) == pytest.approx(by_hand / 3, rel=1e-5)
    assert float(with_shift - plain) == pytest.approx(2.0 * by_hand / 3, rel=1e-4)
    torch.manual_seed(7)
    opened = open_loop_pass(wm, start, batch)
    both, metrics = world_model_loss(start, traj, batch, w, shift_target=target, open_loop=opened)
    # each open-loop term written out on the open-loop predictions, masked, summed over steps
    frames = batch.frames.float() / 255
    changed = (frames - torch.cat([batch.init_frames[-2:-1].float() / 255, frames[:-1]])).abs() > 0.05
    changed = changed.any(-3, keepdim=True).float()
    sq = (opened.image - frames) ** 2 * (1 + 3.0 * changed)
    per_step = {
        "image": (0.5 * sq.sum((-3, -2, -1)), mask),
        "shift": (((opened.shift - target) ** 2).sum(-1), mask),
        "reward": (0.5 * (opened.reward - batch.reward) ** 2, batch.prev_mask),
        "done": (
            -(batch.done * torch.log(torch.sigmoid(opened.done_logit)))
            - (1 - batch.done) * torch.log(1 - torch.sigmoid(opened.done_logit)),
            batch.prev_mask,
        ),
    }
    open_by_hand = {k: float((v * m).sum(0).mean()) for k, (v, m) in per_step.items()}
    for term, value in open_by_hand.items():
        assert float(metrics[f"losses/open_loop_{term}"]) == pytest.approx(value, rel=1e-4), term
    weights = {"image": 1.0, "shift": 2.0, "reward": 1.0, "done": 1.0}
    added = sum(0.5 * weights[k] * v for k, v in open_by_hand.items())
    assert float(both - with_shift) == pytest.approx(added, rel=1e-4)
    assert float((step_terms(traj, batch, w)["image"] - 0.5 * sq.sum((-3, -2, -1))).abs().max()) > 0
    # the open-loop predictions are the prior's, decoded and read as the batched path does
    torch.manual_seed(7)
    feat, _ = wm.prior_rollout(start, batch.prev_action_one_hot(15))
    torch.testing.assert_close(opened.image, wm.decode_steps(feat, batch.init_frames[-2].float() / 255)[0])
    torch.testing.assert_close(opened.reward, wm.reward_head(feat).squeeze(-1))
    torch.testing.assert_close(opened.done_logit, wm.done_head(feat).squeeze(-1))


def test_the_policy_term_is_the_kl_from_the_recorded_policy_to_the_agent_on_the_simulated_frame():
    wm, agent = models()
    config = replace(COPY, num_sim_steps=3)
    batch = synthetic_batch(config, 16, 3)
    batch.logits = torch.randn(3, 3, 15)
    batch.frame_mask[2, 1] = False  # a padded step does not count
    torch.manual_seed(4)
    start, traj = teacher_forced(wm, agent, batch)
    w = LossWeights(policy_kl=7.0)
    plain, _ = world_model_loss(start, traj, batch, replace(w, policy_kl=0.0))
    total, metrics = world_model_loss(start, traj, batch, w)
    by_hand = 0.0
    for k in range(3):
        for b in range(3):
            if batch.frame_mask[k, b]:
                p = torch.softmax(batch.logits[k, b].double(), -1)
                q = torch.softmax(traj.logits[k, b].detach().double(), -1)
                by_hand += float(sum(p[a] * math.log(p[a] / q[a]) for a in range(15)))
    assert float(metrics["losses/policy_kl"]) == pytest.approx(by_hand / 3, rel=1e-4)
    assert float(total - plain) == pytest.approx(7.0 * by_hand / 3, rel=1e-4)
    # its gradient reaches the decoder through the frame the agent saw
    wm.zero_grad()
    (total - plain).backward()
    assert wm.decoder.convs[-1].weight.grad.abs().sum() > 0


def test_an_untrained_refiner_leaves_the_moved_copy_and_a_dream_without_a_frame_is_drawn():
    wm, _agent = models(config=REFINE)
    torch.nn.init.zeros_(wm.refiner.out.weight)  # as built
    feat = torch.randn(3, REFINE.deter + REFINE.stoch * REFINE.classes)
    prev, shift = torch.rand(3, 3, 64, 64), torch.tensor([[1.0, -2.0], [0.5, 0.0], [-3.0, 3.0]])
    image, got = wm._decode_with_shift(feat, prev, torch.zeros(3, 15), shift)
    x = wm.motion.frame(wm.motion.convs(prev).flatten(1)) + wm.motion.state(feat[:, : REFINE.deter])
    expected = (shift + wm.motion.out(torch.cat([x, torch.zeros(3, 15), shift / 3.0], -1))).clamp(-3, 3)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(image, shift_frames(prev, expected))
    assert wm.decoder.convs[-1].out_channels == 3  # no gate: the decoder only draws frames with no copy
    torch.testing.assert_close(wm.decode(feat), wm.decoder(feat))
    with pytest.raises(ProclabError, match="frame_refiner"):
        WorldModelConfig(frame_refiner=True)


def test_training_detaches_what_the_motion_and_refiner_read_and_evaluation_does_not():
    wm, _agent = models(config=REFINE)
    feat = torch.randn(2, REFINE.deter + REFINE.stoch * REFINE.classes)
    shift = torch.tensor([[1.0, 0.0], [0.0, -1.0]])

    def grad_of_prev(training: bool) -> torch.Tensor:
        wm.train(training)
        prev = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
        image, _ = wm._decode_with_shift(feat, prev, torch.zeros(2, 15), shift)
        (g,) = torch.autograd.grad(image.sum(), prev)
        return g

    trained, evaluated = grad_of_prev(True), grad_of_prev(False)
    prev = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
    wm.train(True)
    moved_shift = wm._shift(feat, prev.detach(), torch.zeros(2, 15), shift)
    (copy_only,) = torch.autograd.grad(shift_frames(prev, moved_shift).sum(), prev)
    torch.testing.assert_close(trained, copy_only)  # training: the gradient goes through the copy alone
    assert (evaluated - copy_only).abs().max() > 1e-3  # evaluation: through what the nets read as well


def test_a_clamped_shift_is_pulled_back_and_training_reads_the_previous_shift_detached():
    wm, _agent = models(config=MOTION)
    feat = torch.randn(2, MOTION.deter + MOTION.stoch * MOTION.classes)
    prev = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    limit = wm.motion.max_shift

    def shift_and_grad(training: bool, prev_shift: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        wm.train(training)
        prev_shift = prev_shift.clone().requires_grad_(True)
        shift = wm._shift(feat, prev, torch.zeros(2, 15), prev_shift)
        (g,) = torch.autograd.grad((shift * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum(), prev_shift)
        return shift, g

    # far past the clamp: the shift is the clamp, and its gradient still reaches the previous shift
    beyond = torch.full((2, 2), 10.0 * limit)
    shift, g = shift_and_grad(True, beyond)
    torch.testing.assert_close(shift, torch.full((2, 2), limit))
    torch.testing.assert_close(g, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))  # the identity path, unclamped
    # inside the clamp: training's gradient is the identity path alone; evaluation adds what the MLP reads
    inside = torch.tensor([[0.5, -1.0], [1.5, 0.25]])
    _, trained = shift_and_grad(True, inside)
    _, evaluated = shift_and_grad(False, inside)
    torch.testing.assert_close(trained, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    x = wm.motion.frame(wm.motion.convs(prev).flatten(1)) + wm.motion.state(feat[:, : MOTION.deter])
    read = inside.clone().requires_grad_(True)
    change = wm.motion.out(torch.cat([x.detach(), torch.zeros(2, 15), read / limit], -1))
    (by_hand,) = torch.autograd.grad((change * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum(), read)
    torch.testing.assert_close(evaluated, trained + by_hand)
