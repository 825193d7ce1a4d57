"""Five experiments a researcher runs on a trained agent, with proclab's public API only.

1. **Load and evaluate** both agents on levels they never trained on, with exact intervals.
2. **A cache with ground truth**, checked against an independent forward pass written here from the agent's
   weights alone (``torch.nn.functional`` and ``torch.nn.GRUCell``): every cached activation of every played
   step agrees within 1e-5, because proclab reads activations in fp32, as the agent computes them.
3. **The per-level cheese vector** (the maze agent's activation on a level's first frame with the cheese
   minus without it), subtracted in one batched rollout, one vector per episode, beside same-norm random
   vectors: does removing "cheese" from the agent's mind lower how often it reaches the cheese? Exact
   paired (McNemar) tests, level by level.
4. **Activation patching with a hook function** (TransformerLens's ``fwd_hooks``): one episode's recurrent
   state written into another's at one step; the policy then is the heads of the patched state, computed
   here by hand, and the patch moves it further than a same-norm random state does.
5. **A GRU probe with its controls**: where the agent is, read from its recurrent state, against the same
   probe on a randomly initialised agent, shuffled labels and the step index.

By default the agents are the small ones proclab ships (``coinrun/small``, ``maze/small``); any agent of the
same architecture (IMPALA torso, one GRU layer) works, e.g. ``--coinrun coinrun/interpreting-rl-behavior``.
CI runs this script (``tests/test_examples.py``) with small budgets::

    python examples/five_experiments.py --episodes 64 --levels 48
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import proclab

HOOKS = ["torso.block1.hook_out", "torso.hook_fc", "core.0.hook_h"]


def evaluate(agent, name: str, episodes: int) -> None:
    ro = proclab.rollout(agent, levels="held-out", episodes=episodes, truth=True, seed=0)
    done = proclab.stats.proportion(ro.level_complete.numpy())
    print(f"1. {name}: completes {done.count}/{done.of} held-out levels, {done.share:.2f} "
          f"[{done.ci.low:.2f}, {done.ci.high:.2f}]; mean length {ro.lengths.float().mean():.0f} steps")  # fmt: skip


def reference_forward(
    weights: dict[str, torch.Tensor], frames: torch.Tensor, blocks: int
) -> dict[str, torch.Tensor]:
    """One episode ``(T, 3, 64, 64)`` uint8 through the IMPALA torso, a GRU and the heads, from the weights
    alone (the agent's modules are not used): the activations at :data:`HOOKS` and the logits, per step."""
    x = frames.float() / 255
    out = {}
    for i in range(blocks):
        p = f"torso.block{i}."
        x = F.conv2d(x, weights[p + "conv.weight"], weights[p + "conv.bias"], padding=1)
        x = F.max_pool2d(x, 3, stride=2, padding=1)
        for r in ("res0", "res1"):
            q = p + r + "."
            h = F.conv2d(F.relu(x), weights[q + "conv0.weight"], weights[q + "conv0.bias"], padding=1)
            x = x + F.conv2d(F.relu(h), weights[q + "conv1.weight"], weights[q + "conv1.bias"], padding=1)
        out[f"torso.block{i}.hook_out"] = x
    fc = F.relu(F.linear(F.relu(x).flatten(1), weights["torso.fc.weight"], weights["torso.fc.bias"]))
    out["torso.hook_fc"] = fc
    size = weights["core.0.weight_hh"].shape[1]
    gru = torch.nn.GRUCell(fc.shape[1], size)
    gru.load_state_dict({k: weights[f"core.0.{k}"] for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")})
    h, states = torch.zeros(1, size), []
    for t in range(len(fc)):
        h = gru(fc[t : t + 1], h)
        states.append(h[0])
    out["core.0.hook_h"] = torch.stack(states)
    out["logits"] = F.linear(
        out["core.0.hook_h"], weights["heads.policy.weight"], weights["heads.policy.bias"]
    )
    return out


def cache_against_reference(agent, episodes: int) -> None:
    ro = proclab.rollout(agent, levels="held-out", episodes=episodes, cache=HOOKS, truth=True, seed=1)
    weights = {k: v.detach().float().cpu() for k, v in agent.state_dict().items()}
    worst = 0.0  # the largest difference relative to the tensor's scale (its largest magnitude, at least 1):
    with torch.no_grad():  # fp32 sums in another order differ by a few ulps of the values summed
        for b in range(ro.num_episodes):
            n = int(ro.lengths[b])
            ref = reference_forward(weights, ro.obs[:n, b], len(agent.config.widths))
            pairs = [(ro.cache.episode(name, b), ref[name]) for name in HOOKS] + [
                (ro.logits[:n, b], ref["logits"])
            ]
            for got, want in pairs:
                worst = max(worst, float((got - want).abs().max() / want.abs().max().clamp(min=1.0)))
    print(f"2. cache of {int(ro.mask.sum())} steps vs the independent forward pass: largest difference {worst:.1e} "
          f"of the activations' scale; ground truth per step: {', '.join(list(ro.truth)[:6])}, ...")  # fmt: skip
    assert worst < 1e-5, f"the cache differs from the independent forward pass by {worst} of its scale"


def cheese_vectors(
    maze, levels: int, hook: str = "torso.block2.res1.hook_out", coefficient: float = 1.0
) -> None:
    mode = maze.env_config.mode
    found = [proclab.Level.generate("maze", 1_000_000_000 + i, mode=mode) for i in range(levels)]  # held out
    pairs = [lv for level in found for lv in (level, level.remove("cheese"))]
    first = proclab.rollout(
        maze, levels=pairs, episodes=len(pairs), num_envs=len(pairs), cache=[hook], seed=2
    )
    at_start = first.cache[hook][0]  # each episode's first step: (2L, C, H, W)
    vectors = at_start[0::2] - at_start[1::2]  # per level: with the cheese minus without
    g = torch.Generator().manual_seed(3)
    noise = torch.randn(vectors.shape, generator=g)
    norms = vectors.flatten(1).norm(dim=1)
    control = noise * (norms / noise.flatten(1).norm(dim=1)).view(-1, 1, 1, 1)  # same norm, random direction

    def play(per_level):
        edits = [] if per_level is None else [
            proclab.Intervention(hook, "all", "add", -coefficient * per_level, per_row=True)
        ]  # fmt: skip
        ro = proclab.rollout(maze, levels=found, episodes=levels, num_envs=levels, interventions=edits,
                             truth=True, seed=4)  # fmt: skip
        return ro.goals["cheese"].numpy()

    plain, steered, random = play(None), play(vectors), play(control)
    for name, got in (("cheese vector", steered), ("same-norm random", random)):
        p = proclab.stats.proportion(got)
        print(f"3. P(cheese) {name} subtracted: {p.share:.2f} [{p.ci.low:.2f}, {p.ci.high:.2f}] "
              f"against {plain.mean():.2f} unedited; {proclab.stats.mcnemar(plain, got)}")  # fmt: skip


def patching(agent, episodes: int) -> None:
    ro = proclab.rollout(agent, levels="held-out", episodes=episodes, cache=["core.0.hook_h"], seed=5)
    a, b = 0, 1  # write episode b's state at step t into episode a at step t
    t = int(min(ro.lengths[a], ro.lengths[b])) - 1
    frames = ro.obs[: t + 1, a : a + 1]
    donor = ro.cache["core.0.hook_h"][t, b : b + 1]
    g = torch.Generator().manual_seed(6)
    noise = torch.randn(donor.shape, generator=g)
    random = noise * donor.norm() / noise.norm()

    def patched_logits(value):
        calls = iter(range(t + 1))

        def write(act, hook):  # a per-step hook point: called once per step with (B, 64)
            return value if next(calls) == t else None

        with torch.no_grad():
            return agent.run_with_hooks(frames, fwd_hooks=[("core.0.hook_h", write)])[0].logits[t, 0]

    heads = agent.state_dict()
    by_hand = F.linear(donor[0], heads["heads.policy.weight"], heads["heads.policy.bias"])
    moved = patched_logits(donor)
    torch.testing.assert_close(moved, by_hand, rtol=1e-5, atol=1e-5)

    def shift(logits):
        return float((F.log_softmax(logits, -1).exp() - F.softmax(ro.logits[t, a], -1)).abs().sum() / 2)

    print(f"4. patching episode {b}'s state into episode {a} at step {t}: the policy moves by total variation "
          f"{shift(moved):.3f} (= the heads of the donor state, checked), a same-norm random state {shift(patched_logits(random)):.3f}")  # fmt: skip


def gru_probe(agent, episodes: int) -> None:
    ro = proclab.rollout(
        agent, levels="held-out", episodes=episodes, cache=["core.0.hook_h"], truth=True, seed=7
    )
    settings = proclab.analyze.ProbeSettings(targets=("agent_x", "agent_y"), folds=4, bootstrap=200)
    probes = proclab.analyze.probe(ro, "core.0.hook_h", settings=settings, progress=False)
    for row in probes.table():
        if (
            row["model"] == "probe"
        ):  # its margin over the strongest control, with the episode-bootstrap interval
            lo, hi = row["margin ci"]
            print(f"5. {row['target']} from core.0.hook_h: R^2 {row['r2']:.2f}, {row['probe margin']:+.2f} "
                  f"[{lo:+.2f}, {hi:+.2f}] over the {row['vs'].replace('_', ' ')}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--coinrun", default="coinrun/small")
    parser.add_argument("--maze", default="maze/small")
    parser.add_argument("--episodes", type=int, default=64, help="episodes of each rollout")
    parser.add_argument("--levels", type=int, default=48, help="mazes of the cheese-vector experiment")
    args = parser.parse_args()
    coinrun, maze = proclab.load(args.coinrun), proclab.load(args.maze)
    evaluate(coinrun, args.coinrun, args.episodes)
    evaluate(maze, args.maze, args.episodes)
    cache_against_reference(coinrun, max(2, args.episodes // 8))
    cheese_vectors(maze, args.levels)
    patching(coinrun, 2)
    gru_probe(coinrun, args.episodes)


if __name__ == "__main__":
    main()
