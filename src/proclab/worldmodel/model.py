"""The generative agent-environment model: a differentiable simulator of an agent in its world.

**Architecture** (interpreting-rl-behavior's Gen-2 model; sizes per preset in docs/worldmodel.md):

* *Encoder*: each of the first ``num_init_steps`` frames goes through four residual
  down-blocks (64x64 -> 4x4), a GRU reads them in order, an MLP maps its last output to the
  **bottleneck vector**, L2-normalised onto the unit sphere.
* *Converters* (MLPs) from the bottleneck: to the initial environment state (``h``, ``z``
  logits), and, from the *detached* bottleneck, to the agent's initial state and to the
  previous action (a straight-through one-hot of its argmax).
* *RSSM* environment stepper: ``x = ELU(LN(W_z z + W_a a))``, ``h' = LNGRU(x, h)``; a prior
  over ``z'`` from ``h'`` and a posterior from ``h'`` and an embedding of the true frame;
  ``z`` is ``stoch`` categoricals of ``classes`` classes, sampled straight-through.
* *Heads* on ``[h, z]``: image decoder (transposed convolutions), reward, done.
* **The real, frozen agent in the loop**: each predicted frame (clamped to [0, 1] with an
  identity gradient) goes through the agent with its own carried state; it returns logits, a
  value, its next state and its action as a straight-through one-hot, which is the action of
  the next environment step. The agent's weights are frozen (``requires_grad=False``) but its
  activations are not, so gradients flow from any agent quantity back through the agent *and*
  the environment to the bottleneck. ``env_grads=False`` cuts the path through the action fed
  back to the environment.

**Simulation** (:meth:`WorldModel.simulate`): step ``k`` consumes the previous action
``a_{k-1}`` and predicts frame ``k``, the reward and done flag of ``a_{k-1}``, and (through
the agent) the agent's state leaving step ``k``, its logits, value and action ``a_k``. Given
the actions (teacher forcing, or evaluation with the recorded actions) the environment does
not depend on the agent, so the RSSM loop runs first and the decoder and the agent then see
all ``S * B`` frames at once (``agent.unroll``; per-step states come from its hook points).
Without actions the loop is closed and runs step by step; the exact per-step tensors (frame,
agent state, ``env_h``) are then kept in ``Trajectory.per_step`` for saliency.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from proclab.models import Agent, capture
from proclab.store.state_codec import StateCodec
from proclab.worldmodel.config import WorldModelConfig
from proclab.worldmodel.distributions import action_st, clamp_st, sample_st
from proclab.worldmodel.layers import (
    CameraMotion,
    FrameEncoder,
    FrameRefiner,
    ImageDecoder,
    LayerNormGRUCell,
    NormGRUCell,
    ResBlockDown,
    SeedResBlockDown,
    mlp,
    shift_frames,
)


@dataclass
class Start:
    """The simulator before its first step, decoded from bottleneck vectors ``(B, bottleneck)``."""

    bottleneck: Tensor
    env_h: Tensor
    """``(B, deter)``: the deterministic state before step 0."""
    env_z: Tensor
    """``(B, stoch * classes)``: the straight-through one-hot stochastic state before step 0."""
    agent_state: Tensor
    """``(B, D)``: the agent's state entering step 0, flat (predicted; callers may put the true one)."""
    action_logits: Tensor
    """``(B, A)``: the predicted previous action's logits."""
    prev_action: Tensor
    """``(B, A)``: its straight-through one-hot (drives step 0 of a closed-loop simulation)."""
    frame: Tensor | None = None
    """``(B, 3, 64, 64)`` in [0, 1]: the true frame before step 0, which a copy-path decoder
    (``decoder_copy``) copies at step 0; None (a dream from a bottleneck alone): step 0 is generated."""
    shift: Tensor | None = None
    """``(B, 2)``: the camera's last move before step 0 in pixels (measured between the two true frames
    before it), which a ``camera_motion`` model carries on from; None: at rest."""


@dataclass
class Trajectory:
    """What a simulation of ``S`` steps produced; time-major ``(S, B, ...)`` (see the module docstring)."""

    start: Start
    env_h: Tensor
    env_z: Tensor
    prior_logits: Tensor
    """``(S, B, stoch, classes)``."""
    post_logits: Tensor | None
    """``(S, B, stoch, classes)`` when true frames were given, else None."""
    image: Tensor
    """The decoder's mean frame (unclamped; the image loss reads this)."""
    frame: Tensor
    """The frame the agent saw: ``image`` clamped to [0, 1] with an identity gradient."""
    reward: Tensor
    """Predicted reward of the previous action ``a_{k-1}``."""
    done_logit: Tensor
    """Logit of "the episode ended after ``a_{k-1}``"."""
    agent_state: Tensor
    """``(S, B, D)``: the agent's state leaving step ``k`` (flat, store layout)."""
    logits: Tensor
    value: Tensor
    action: Tensor
    """``(S, B, A)``: the agent's action ``a_k`` as a straight-through one-hot."""
    per_step: dict[str, list[Tensor]] = field(default_factory=dict)
    """Closed loop only: ``frame``, ``agent_state``, ``env_h`` as the exact tensors each step consumed."""
    shift: Tensor | None = None
    """``(S, B, 2)``: a copy-path model's predicted camera shift at each step, in pixels (None without one)."""
    image_alone: Tensor | None = None
    """Teacher forcing of a copy-path model: step 0's frame decoded from the state alone, with nothing to
    copy, as a dream from a bottleneck draws it (trained so that such dreams start from a good frame)."""


def as_float_frames(frames: Tensor) -> Tensor:
    """uint8 frames -> floats in [0, 1]; floating frames unchanged."""
    return frames.float().div(255) if frames.dtype == torch.uint8 else frames


class RSSM(nn.Module):
    """The recurrent state-space environment stepper (one step at a time)."""

    def __init__(self, config: WorldModelConfig, num_actions: int, embed_dim: int):
        super().__init__()
        c = config
        self.stoch, self.classes = c.stoch, c.classes
        z_dim = c.stoch * c.classes
        self.z_in = nn.Linear(z_dim, c.hidden)
        self.a_in = nn.Linear(num_actions, c.hidden, bias=False)
        self.in_norm = nn.LayerNorm(c.hidden)
        self.cell = (NormGRUCell if c.rssm_cell == "norm_gru" else LayerNormGRUCell)(c.hidden, c.deter)
        self.prior = mlp(c.deter, (c.hidden,), z_dim, norm=True)
        self.post_h = nn.Linear(c.deter, c.hidden)
        self.post_embed = nn.Linear(embed_dim, c.hidden, bias=False)
        self.post_out = nn.Sequential(nn.LayerNorm(c.hidden), nn.ELU(), nn.Linear(c.hidden, z_dim))

    def step(self, h: Tensor, z: Tensor, a: Tensor) -> tuple[Tensor, Tensor]:
        """``h_k`` and the prior's logits ``(B, stoch, classes)`` from ``h_{k-1}, z_{k-1}, a_{k-1}``."""
        x = F.elu(self.in_norm(self.z_in(z) + self.a_in(a)))
        h = self.cell(x, h)
        return h, self.prior(h).float().view(-1, self.stoch, self.classes)

    def posterior(self, h: Tensor, embed: Tensor) -> Tensor:
        """Posterior logits from ``h_k`` and ``post_embed(embedding of the true frame k)``."""
        return self.post_out(self.post_h(h) + embed).float().view(-1, self.stoch, self.classes)


class WorldModel(nn.Module):
    """Encoder, converters, RSSM, decoder and heads; the agent is an argument of :meth:`simulate`."""

    def __init__(
        self, config: WorldModelConfig, num_actions: int, agent_state_shapes: dict[str, tuple[int, ...]]
    ):
        super().__init__()
        c = self.config = config
        self.num_actions = num_actions
        self.codec = StateCodec(agent_state_shapes)
        chans = (3, *c.encoder_channels)
        if c.encoder_block == "seed":
            blocks = [SeedResBlockDown(chans[i], chans[i + 1], 64 >> i) for i in range(4)]
        else:
            blocks = [ResBlockDown(chans[i], chans[i + 1]) for i in range(4)]
        self.encoder = nn.Sequential(*blocks)
        self.encoder_rnn = nn.GRU(c.encoder_channels[-1] * 4 * 4, c.encoder_rnn)
        self.encoder_out = mlp(c.encoder_rnn, (c.encoder_rnn,) * 2, c.bottleneck)
        z_dim = c.stoch * c.classes
        self.to_env = mlp(c.bottleneck, c.env_converter, c.deter + z_dim)
        self.to_agent = mlp(c.bottleneck, c.agent_converter, self.codec.width) if self.codec.width else None
        self.to_action = mlp(c.bottleneck, c.action_converter, num_actions)
        self.embed = FrameEncoder(c.embed_depth)
        self.rssm = RSSM(c, num_actions, self.embed.out_dim)
        feat = c.deter + z_dim
        self.decoder = ImageDecoder(feat, c.decoder_depth, 4 if c.decoder_copy and not c.frame_refiner else 3)
        self.refiner = FrameRefiner(c.deter, c.camera_shift, c.decoder_depth) if c.frame_refiner else None
        # the camera motion and the refiner read the deterministic state h alone: a posterior z (teacher
        # forcing) carries the very frame they are to predict, which no dream has
        self.motion = CameraMotion(c.deter, num_actions, c.camera_shift) if c.camera_motion else None
        self.shift = nn.Linear(feat, 2) if c.camera_shift and not c.camera_motion else None
        if self.shift is not None:  # start by copying in place
            nn.init.zeros_(self.shift.weight)
            nn.init.zeros_(self.shift.bias)
        self.reward_head = mlp(feat, (c.head_hidden,) * c.head_layers, 1, norm=True)
        self.done_head = mlp(feat, (c.head_hidden,) * c.head_layers, 1, norm=True)
        self._channels_last = False

    def channels_last(self, enabled: bool = True) -> WorldModel:
        """Channels-last convolution weights and inputs (called by ``Runtime.prepare``)."""
        fmt = torch.channels_last if enabled else torch.contiguous_format
        for m in self.modules():
            if isinstance(m, nn.Conv2d | nn.ConvTranspose2d):
                m.to(memory_format=fmt)
        self._channels_last = enabled
        return self

    def _images_in(self, frames: Tensor) -> Tensor:
        x = as_float_frames(frames)
        return x.contiguous(memory_format=torch.channels_last) if self._channels_last else x

    # -- bottleneck ------------------------------------------------------------------------------
    def encode(self, init_frames: Tensor) -> Tensor:
        """Frames ``(num_init_steps, B, 3, 64, 64)`` -> unit bottleneck vectors ``(B, bottleneck)``."""
        n, B = init_frames.shape[:2]
        features = self.encoder(self._images_in(init_frames.flatten(0, 1))).reshape(n, B, -1)
        with torch.autocast(features.device.type, enabled=False):  # three steps: fp32 costs nothing
            out, _ = self.encoder_rnn(features.float())
        return F.normalize(self.encoder_out(out[-1]).float(), dim=-1, eps=1e-8)

    def start(self, bottleneck: Tensor, modal: bool = False, detach: bool = True) -> Start:
        """Decode the initial environment state, agent state and previous action from the bottleneck.

        With ``detach`` (training) the agent-state and action converters read a detached
        bottleneck, so their losses do not shape it; ``detach=False`` lets gradients reach the
        bottleneck through them too (optimising bottleneck vectors, where the initial agent
        state is part of what the vector controls).
        """
        c = self.config
        env = self.to_env(bottleneck).float()
        h0, z_logits = env.split([c.deter, c.stoch * c.classes], -1)
        z0 = sample_st(z_logits.view(-1, c.stoch, c.classes), modal).flatten(1)
        detached = bottleneck.detach() if detach else bottleneck
        if self.to_agent is None:
            agent = bottleneck.new_zeros(bottleneck.shape[0], 0)
        else:
            agent = self.to_agent(detached).float()
            agent = torch.tanh(agent) if c.agent_state_tanh else agent
        action_logits = self.to_action(detached).float()
        return Start(bottleneck, h0, z0, agent, action_logits, sample_st(action_logits, modal=True))

    # -- simulation ------------------------------------------------------------------------------
    def reward_done(self, feat: Tensor) -> tuple[Tensor, Tensor]:
        """The reward of the previous action and the logit of "the episode ended", from states ``[h, z]``."""
        return self.reward_head(feat).float().squeeze(-1), self.done_head(feat).float().squeeze(-1)

    def decode(self, feat: Tensor, prev: Tensor | None = None) -> Tensor:
        """The frame (unclamped) from the state ``[h, z]`` and, for a copy-path decoder, the previous frame.

        ``decoder_copy``: ``gate * shift(prev) + (1 - gate) * generated``, the gate per pixel and the
        shift (``camera_shift``) predicted from the state; without ``prev`` the generated frame alone.
        """
        return self._decode_with_shift(feat, prev)[0]

    def _decode_with_shift(
        self,
        feat: Tensor,
        prev: Tensor | None,
        action: Tensor | None = None,
        prev_shift: Tensor | None = None,
        out: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """:meth:`decode` and the camera shift it applied (None without one). A ``camera_motion`` model
        also reads the action driving the step and the shift before it (zero where not given); ``out``: the
        decoder's output for ``feat``, when already computed."""
        if self.refiner is not None and prev is not None:
            shift = self._shift(feat, prev, action, prev_shift)
            moved = prev.float() if shift is None else shift_frames(prev, shift)
            h = feat[..., : self.config.deter]
            return moved + self.refiner(*self._context(moved, prev.float()), h, shift), shift
        out = self.decoder(feat) if out is None else out
        if not self.config.decoder_copy:
            return out, None
        shift = self._shift(feat, prev, action, prev_shift)
        return self._compose(out, shift, prev, self.config.copy_gate_bias), shift

    def _shift(
        self,
        feat: Tensor,
        prev: Tensor | None = None,
        action: Tensor | None = None,
        prev_shift: Tensor | None = None,
    ) -> Tensor | None:
        """The predicted camera shift in pixels ``(N, 2)``: from the state alone, or (``camera_motion``) the
        previous shift moved on by what the copied frame, the action and the state say; None without a
        shift, or for a motion model with no frame to copy."""
        if self.motion is not None:
            if prev is None:
                return None
            n = feat.shape[0]
            action = feat.new_zeros(n, self.num_actions) if action is None else action
            prev_shift = feat.new_zeros(n, 2) if prev_shift is None else prev_shift
            frame, read_shift = self._context(prev, prev_shift)
            return self.motion(frame, action, prev_shift, feat[..., : self.config.deter], read_shift)
        if self.shift is None:
            return None
        return self.config.camera_shift * torch.tanh(self.shift(feat).float())

    def _context(self, *frames: Tensor) -> tuple[Tensor, ...]:
        """Frames (and the previous shift) that the camera motion and the refiner *read*: detached while
        training. Each simulated frame feeds the next step twice, as the copy (whose gradient, through the
        shift, is contractive) and as what these nets read; backpropagating through the second over 16 steps
        multiplies their Jacobians and diverged within a few hundred updates (docs/worldmodel.md). Outside
        training (saliency, dreams, visualisation) nothing is detached, so gradients through the simulator
        stay exact."""
        return tuple(f.detach() for f in frames) if self.training else frames

    @staticmethod
    def _compose(out: Tensor, shift: Tensor | None, prev: Tensor | None, gate_bias: float = 0.0) -> Tensor:
        """A copy-path decoder's output ``(N, 4, 64, 64)`` (generated RGB, gate logit) and the previous frame
        -> the frame, in float32."""
        generated = out[:, :3].float()
        if prev is None:
            return generated
        if shift is not None:
            prev = shift_frames(prev, shift)
        gate = torch.sigmoid(out[:, 3:].float() + gate_bias)
        return gate * prev.float() + (1 - gate) * generated

    def decode_steps(
        self,
        feat: Tensor,
        prev: Tensor | None,
        actions: Tensor | None = None,
        prev_shift: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """``(S, B, feat)`` -> ``(S, B, 3, 64, 64)`` frames and the shifts ``(S, B, 2)`` (or None). The decoder
        reads only the state, so it runs on all steps at once; along the copy path the shift and the blending
        go step by step (each step copies the frame the step before produced, as the agent saw it; a
        ``camera_motion`` model also reads it, the action ``actions[k]`` and the shift before)."""
        S, B = feat.shape[:2]
        out = None
        if self.refiner is None or prev is None:  # a refiner decodes only a first frame with nothing to copy
            out = self.decoder(feat.flatten(0, 1))
            out = out.view(S, B, *out.shape[1:])
        if not self.config.decoder_copy:
            return out, None
        images, shifts = [], []
        for k in range(S):
            action = None if actions is None else actions[k]
            image, prev_shift = self._decode_with_shift(
                feat[k], prev, action, prev_shift, None if out is None else out[k]
            )
            images.append(image)
            shifts.append(prev_shift)
            prev = clamp_st(image)
        shift = None if any(s is None for s in shifts) else torch.stack(shifts)
        return torch.stack(images), shift

    def prior_rollout(self, start: Start, actions: Tensor, modal: bool = False) -> tuple[Tensor, Tensor]:
        """The environment alone, open loop: the prior driven by ``actions`` ``(S, B, A)`` (``a_{k-1}``) from
        ``start``; returns the features ``[h, z]`` ``(S, B, feat)`` and the prior logits. No agent runs: what
        training the decoder on dreamed states needs, at the cost of the RSSM loop alone."""
        h, z = start.env_h, start.env_z
        feats, priors = [], []
        for k in range(actions.shape[0]):
            h, z, prior, _ = self._env_step(h, z, actions[k], None, False, modal)
            feats.append(torch.cat([h, z], -1))
            priors.append(prior)
        return torch.stack(feats), torch.stack(priors)

    def _env_step(self, h, z, a, embed, observe: bool, modal: bool):
        h, prior = self.rssm.step(h, z, a)
        post = None if embed is None else self.rssm.posterior(h, embed)
        z = sample_st(post if observe else prior, modal).flatten(1)
        return h, z, prior, post

    def simulate(
        self,
        agent,
        start: Start,
        steps: int,
        *,
        actions: Tensor | None = None,
        frames: Tensor | None = None,
        observe: bool = False,
        modal: bool = False,
        env_grads: bool = True,
        greedy: bool = True,
    ) -> Trajectory:
        """Simulate ``steps`` steps of ``agent`` (the Agent API, frozen) from ``start``.

        ``actions`` ``(S, B, A)``: one-hot actions ``a_{k-1}`` driving the environment (teacher
        forcing); None closes the loop with the agent's own actions (``start.prev_action`` at
        step 0). ``frames`` ``(S, B, 3, 64, 64)``: the true frames; the posterior is then computed
        (``post_logits``) and, with ``observe``, sampled instead of the prior. ``modal`` takes the
        argmax of each categorical instead of sampling; ``greedy`` the agent's modal action
        (else a sample of its policy); ``env_grads=False`` detaches the actions fed back.
        """
        codec = StateCodec(agent.state_shapes())
        if start.agent_state.shape[-1] != codec.width:
            raise ValueError(
                f"start.agent_state has width {start.agent_state.shape[-1]}; the agent's is {codec.width}"
            )
        if observe and frames is None:
            raise ValueError("observe=True needs the true frames")
        embed = None
        if frames is not None:
            S, B = frames.shape[:2]
            embed = self.rssm.post_embed(self.embed(self._images_in(frames.flatten(0, 1)))).view(S, B, -1)
        if actions is not None and isinstance(agent, Agent):
            return self._open_loop(agent, codec, start, steps, actions, embed, observe, modal, greedy)
        return self._closed_loop(
            agent, codec, start, steps, actions, embed, observe, modal, env_grads, greedy
        )

    def _open_loop(self, agent, codec, start, S, actions, embed, observe, modal, greedy) -> Trajectory:
        h, z = start.env_h, start.env_z
        steps = []
        for k in range(S):
            h, z, prior, post = self._env_step(
                h, z, actions[k], None if embed is None else embed[k], observe, modal
            )
            steps.append((h, z, prior, post))
        hs, zs, priors, posts = zip(*steps, strict=True)
        H, Z = torch.stack(hs), torch.stack(zs)
        B = H.shape[1]
        feat = torch.cat([H, Z], -1)
        image, shift = self.decode_steps(feat, start.frame, actions, start.shift)
        reward, done = self.reward_done(feat.flatten(0, 1))
        reward, done = reward.view(S, B), done.view(S, B)
        frame = clamp_st(image)
        firsts = torch.zeros(S, B, dtype=torch.bool, device=H.device)
        hooks = codec.hook_names()
        with capture(agent, list(hooks.values())) as acts:
            out, _ = agent.unroll(frame, codec.unflatten(start.agent_state), firsts, reward)
        if hooks:
            states = codec.flatten({key: acts[name] for key, name in hooks.items()})
        else:
            states = H.new_zeros(S, B, 0)
        return Trajectory(
            start=start,
            env_h=H,
            env_z=Z,
            prior_logits=torch.stack(priors),
            post_logits=None if embed is None else torch.stack(posts),
            image=image,
            frame=frame,
            reward=reward,
            done_logit=done,
            agent_state=states,
            logits=out.logits,
            value=out.value,
            action=action_st(out.logits, modal=greedy),
            shift=shift,
        )

    def _closed_loop(
        self, agent, codec, start, S, actions, embed, observe, modal, env_grads, greedy
    ) -> Trajectory:
        h, z, s = start.env_h, start.env_z, start.agent_state
        a = start.prev_action if actions is None else actions[0]
        first = torch.zeros(h.shape[0], dtype=torch.bool, device=h.device)
        rows: dict[str, list[Tensor]] = {}
        frame, moved = start.frame, start.shift
        for k in range(S):
            h, z, prior, post = self._env_step(h, z, a, None if embed is None else embed[k], observe, modal)
            feat = torch.cat([h, z], -1)
            image, shift = self._decode_with_shift(feat, frame, a, moved)
            moved = shift
            reward, done = self.reward_done(feat)
            frame = clamp_st(image)
            out, new_state = agent.step(frame, codec.unflatten(s), first, reward)
            s = codec.flatten(new_state) if codec.width else s
            action = action_st(out.logits, modal=greedy)
            if actions is None:
                a = action if env_grads else action.detach()
            elif k + 1 < S:
                a = actions[k + 1]
            step = dict(
                env_h=h,
                env_z=z,
                prior_logits=prior,
                post_logits=post,
                image=image,
                frame=frame,
                reward=reward,
                done_logit=done,
                agent_state=s,
                logits=out.logits,
                value=out.value,
                action=action,
                shift=shift,
            )
            for name, v in step.items():
                rows.setdefault(name, []).append(v)
        stacked = {k: None if v[0] is None else torch.stack(v) for k, v in rows.items()}
        per_step = {k: rows[k] for k in ("frame", "agent_state", "env_h")}
        return Trajectory(start, **stacked, per_step=per_step)
