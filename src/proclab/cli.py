"""The ``proclab`` command: one entry point for the sub-commands of every package.

Sub-commands are registered by name with the function that runs them, ``"package.command:function"``: each
package's commands live in its ``command`` module (docs/architecture.md, "Conventions of the command line"),
one function ``NAME_command(argv: list[str], prog: str) -> None`` each, which parses its own options with tyro
(typed dataclasses whose field docstrings are the ``--help`` text), calls the library and writes. A command's
module is imported only when it runs, so ``proclab --help`` is instant and a command pays only for what it uses.

Every command names what it reads one way (docs/architecture.md, "Conventions of the command line"):
an agent is ``--agent AGENT``, a world model the positional ``WM`` of the ``wm`` commands, an episode
store ``--data DATA``. A command or flag that was renamed answers in one line with its new spelling
(:data:`RENAMED`, :data:`RENAMED_FLAGS`) instead of a parser's generic error.

A :class:`~proclab.errors.ProclabError` (a user mistake) is printed as one line without a
traceback and exits with status 2, and so is a full disk that a writer did not name itself
(:mod:`proclab.io.files` names the file wherever proclab writes one). ``NothingToDo`` (e.g.
``--resume`` of a finished run) prints its line and exits with status 0.
"""

from __future__ import annotations

import importlib
import sys

from proclab.errors import NothingToDo, ProclabError, unknown_choice

# name -> ("module:function", one-line help). Multi-word names form command groups ("data info").
COMMANDS: dict[str, tuple[str, str]] = {
    "import": (
        "proclab.models.importers.command:import_command",
        "an agent trained elsewhere (train-procgen-pytorch, CleanRL, PufferLib, torchbeast, Cleanba) as a run",
    ),
    "train": (
        "proclab.command:train_command",
        "train an agent (PPO or IMPALA) on one or several Procgen games, or PPO on a learned reward",
    ),
    "eval": ("proclab.rl.command:eval_command", "returns and normalised scores of an agent per level split"),
    "render": (
        "proclab.rl.command:render_command",
        "video of what the agent sees, with action/value/reward overlays",
    ),
    "plot": ("proclab.rl.command:plot_command", "training curves of one or several runs (PNG)"),
    "population": (
        "proclab.rl.command:population_command",
        "a grid of PPO agents (seeds x games x level rules x reward rules x presets), resumable, evaluated in one table",
    ),
    "record": (
        "proclab.record.command:record_command",
        "record episodes with the agent's internals into an episode store",
    ),
    "level show": (
        "proclab.levels.command:show_command",
        "a level's parsed state (entities, grid, game fields) as tables and a labelled PNG",
    ),
    "level edit": (
        "proclab.levels.command:edit_command",
        "remove, move or add entities of a kind, move the agent: an edited level-state file",
    ),
    "level export": (
        "proclab.levels.command:export_command",
        "recorded episodes' first game states as a level-state file (to show, edit or replay them)",
    ),
    "data info": (
        "proclab.store.command:info_command",
        "what an episode store holds: episodes, games, returns, size",
    ),
    "data export": (
        "proclab.store.command:export_command",
        "episodes as .npz files or one HDF5 file in Minari's layout",
    ),
    "wm train": (
        "proclab.worldmodel.command:train_command",
        "train the generative agent-environment model on a store",
    ),
    "wm sample": (
        "proclab.worldmodel.command:sample_command",
        "simulated rollouts of the agent in its world model",
    ),
    "wm loss-over-time": (
        "proclab.worldmodel.command:loss_over_time_command",
        "per-step error of imagination vs data",
    ),
    "wm evaluate": (
        "proclab.worldmodel.command:evaluate_command",
        "judge a world model on held-out episodes: frame error in 3 modes vs baselines, rewards, state drift, "
        "a strip of predicted frames",
    ),
    "analyze": (
        "proclab.interpret.command:analyze_command",
        "interpretation analyses of agent and world-model states (see proclab analyze)",
    ),
    "panel export": (
        "proclab.panel.command:export_command",
        "the analysis folder as a static web panel (HTML/JS + data)",
    ),
    "panel serve": (
        "proclab.panel.command:serve_command",
        "serve a panel folder on 127.0.0.1 (GET/HEAD, files inside it only)",
    ),
    "trex demos": (
        "proclab.reward.command:demos_command",
        "T-REX demos: one episode per level, checkpoints of varied skill",
    ),
    "trex train": (
        "proclab.reward.command:train_command",
        "learn a reward from ranked demos (T-REX), held-out correlations",
    ),
    "trex grid": (
        "proclab.reward.command:grid_command",
        "the T-REX grid (games x num-demos x seeds) in parallel, one CSV",
    ),
    "trex evaluate": (
        "proclab.reward.command:evaluate_command",
        "does a learned reward know more than length? partial and binned Spearman, bootstrap CIs",
    ),
    "trex plot": (
        "proclab.reward.command:plot_command",
        "T-REX correlation bars and reward-prediction plots (PNG)",
    ),
    "trex demo-video": (
        "proclab.reward.command:demo_video_command",
        "one T-REX demo as an mp4 with rewards drawn on",
    ),
    "quickstart": ("proclab.quickstart.command:quickstart_command", "the whole pipeline, small, on a CPU"),
    "games": (
        "proclab.envs.command:games_command",
        "list the Procgen games, their modes and the level splits",
    ),
}


RENAMED: dict[str, tuple[str, str]] = {
    "wm frame-error": (
        "wm evaluate",
        "frame error per step in 3 modes against both baselines; --strip-windows N draws the prediction strip",
    ),
    "trex train-policy": (
        "train --reward-model REWARD_MODEL",
        "PPO on a learned reward; --sigmoid as before",
    ),
}
"""Removed command -> (the command that does its job now, what to know)."""

POSITIONAL = "POSITIONAL"
"""Key of :data:`RENAMED_FLAGS` for a positional argument that became a flag."""

RENAMED_FLAGS: dict[str, dict[str, str]] = {
    "eval": {POSITIONAL: "--agent AGENT", "--protocol": "--preset"},
    "render": {POSITIONAL: "--agent AGENT"},
    "record": {POSITIONAL: "--agent AGENT"},
    "level edit": {"--agent": "--move-agent X,Y"},
    "level export": {POSITIONAL: "--data DATA"},
    "data info": {POSITIONAL: "--data DATA"},
    "data export": {POSITIONAL: "--data DATA"},
    "wm train": {"--size": "--preset"},
    "trex demos": {"--checkpoints": "--agents AGENT [AGENT ...]"},
    "trex train": {"--parity": "--preset parity", "--demos": "--data DATA"},
    "trex grid": {
        "--train.parity": "--preset parity",
        "--threads": "--torch-threads",
        "--demos": "--data DATA",
    },
    "trex evaluate": {"--demos": "--data DATA"},
    "trex plot": {"--demos": "--data DATA"},
    "trex demo-video": {"--demos": "--data DATA"},
}
"""Per command, a renamed flag (or :data:`POSITIONAL`: the old positional argument) -> its new spelling."""


def _renamed_command(argv: list[str]) -> str | None:
    """The one-line answer to a removed command at the start of ``argv``, if it is one."""
    for n in range(min(2, len(argv)), 0, -1):
        old = " ".join(argv[:n])
        if old in RENAMED:
            new, note = RENAMED[old]
            return f"'{old}' is now '{new}' ({note})"
    return None


def _renamed_flag(name: str, rest: list[str]) -> str | None:
    """The one-line answer to a renamed flag (or a positional argument that became a flag) of ``name``."""
    renamed = RENAMED_FLAGS.get(name, {})
    if POSITIONAL in renamed and rest and not rest[0].startswith("-"):
        new = renamed[POSITIONAL]
        return f"'{name} {rest[0]}' is now '{name} {new.split()[0]} {rest[0]}' (a flag: {new})"
    for arg in rest:
        flag = arg.split("=", 1)[0]
        if flag in renamed and flag != POSITIONAL:
            return f"'{name} {flag}' is now '{name} {renamed[flag]}'"
    return None


def _usage() -> str:
    width = max(len(name) for name in COMMANDS) + 2
    rows = "\n".join(f"  {name:<{width}}{help_}" for name, (_, help_) in COMMANDS.items())
    return (
        "usage: proclab COMMAND [options]\n\n"
        "proclab: train, evaluate, record, simulate, interpret and reward-learn Procgen agents.\n\n"
        f"commands:\n{rows}\n\nRun 'proclab COMMAND --help' for a command's options."
    )


def _resolve(argv: list[str]) -> tuple[str | None, list[str]]:
    """Longest registered command name that prefixes argv."""
    for n in range(min(3, len(argv)), 0, -1):
        name = " ".join(argv[:n])
        if name in COMMANDS:
            return name, argv[n:]
    return None, argv


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return
    name, rest = _resolve(argv)
    try:
        if name is None and (answer := _renamed_command(argv)) is not None:
            raise ProclabError(answer)
        if name is not None and (answer := _renamed_flag(name, rest)) is not None:
            raise ProclabError(answer)
        if name is None:
            group = [c for c in COMMANDS if c.split()[0] == argv[0]]
            if group:  # a group name alone, e.g. "proclab data"
                print(f"usage: proclab {argv[0]} SUBCOMMAND [options]\n\nsubcommands:")
                for c in group:
                    print(f"  {c.split(' ', 1)[1]:<16}{COMMANDS[c][1]}")
                sys.exit(0 if len(argv) == 1 or argv[1] in ("-h", "--help") else 2)
            raise unknown_choice("command", argv[0], sorted({c.split()[0] for c in COMMANDS}))
        module, function = COMMANDS[name][0].split(":")
        getattr(importlib.import_module(module), function)(rest, prog=f"proclab {name}")
    except NothingToDo as done:
        print(done)
    except ProclabError as err:
        print(f"proclab: error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except OSError as err:
        # lazy: keeps numpy out of `proclab --help`; only a failed write needs it
        from proclab.io.files import DISK_FULL

        if err.errno not in DISK_FULL:
            raise
        where = f" writing {err.filename!r}" if err.filename else ""
        print(f"proclab: error: {err.strerror}{where}; free some space and run again", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("proclab: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
