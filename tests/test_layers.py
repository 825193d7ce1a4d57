"""The package's layers, read from the source: lower layers never import higher ones, nothing outside
``rl`` uses it except to train or to act, and no two modules import each other (even lazily)."""

import ast
from pathlib import Path

import proclab

ROOT = Path(proclab.__file__).parent
# Bottom to top; a module may import its own layer and those below (docs/architecture.md).
LAYERS = [
    {"errors"},
    {"stats"},
    {"envs"},
    {"io"},
    {"store"},
    {"levels"},
    {"run"},
    {"models"},
    {"rl"},
    {"record"},
    {"worldmodel", "reward"},
    {"interpret"},
    {"panel"},
    {"cli", "__main__", "quickstart", "analyze", "train_command"},
]
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}
TOP = LAYERS[-1]
# the PPO trainer with its configs (reward/policy.py trains PPO on a learned reward) and the actor (recording)
RL_FOR_OTHERS = {"proclab.rl.ppo_train", "proclab.rl.config", "proclab.rl.rollout"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_nodes(node: ast.AST):
    """Every node below ``node`` except those under ``if TYPE_CHECKING:`` (annotations only, never run)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
            yield from (n for stmt in child.orelse for n in [stmt, *runtime_nodes(stmt)])
            continue
        yield child
        yield from runtime_nodes(child)


def modules() -> dict[str, set[str]]:
    """Every module of proclab and the proclab modules it imports when run (at the top or inside functions)."""
    found = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph = {}
    for name, path in found.items():
        targets = set()
        for node in runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("proclab"):
                for alias in node.names:  # `from proclab.rl import train` imports the module proclab.rl.train
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if sub in found else node.module)
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith("proclab")}
        graph[name] = {t for t in targets if t in found and t != name}
    return graph


def package(module: str) -> str:
    return module.split(".")[1] if "." in module else "proclab"


def test_lower_layers_never_import_higher_ones():
    graph = modules()
    assert set(map(package, graph)) - {"proclab"} <= set(LEVEL), "a package is missing from LAYERS"
    upward = [
        f"{m} -> {t}"
        for m, targets in graph.items()
        for t in targets
        if package(m) != "proclab" and LEVEL[package(t)] > LEVEL[package(m)]
    ]
    assert not upward


def test_only_trainers_and_actors_of_rl_are_used_outside_it():
    graph = modules()
    outside = [
        f"{m} -> {t}"
        for m, targets in graph.items()
        for t in targets
        if package(t) == "rl" and package(m) not in {"rl", *TOP} and t not in RL_FOR_OTHERS
    ]
    assert not outside


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), i.e. import circles."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_planted_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_between_modules():
    graph = modules()
    # a package's __init__ re-exports its modules; those modules importing the package name is not a circle
    # of design, so edges from a module to its own package's __init__ are left out
    graph = {
        m: {t for t in ts if not (m.startswith(t + ".") and t.count(".") == 1)} for m, ts in graph.items()
    }
    assert cycles(graph) == []


def rooms(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """Which sub-packages of ``package`` (``proclab.interpret``) import which others."""
    depth = package.count(".") + 1
    found: dict[str, set[str]] = {}
    for m, targets in graph.items():
        parts = m.split(".")
        if not m.startswith(package + ".") or len(parts) <= depth + 1:
            continue
        for t in targets:
            other = t.split(".")
            if t.startswith(package + ".") and len(other) > depth + 1 and other[depth] != parts[depth]:
                found.setdefault(parts[depth], set()).add(other[depth])
    return {room: found.get(room, set()) for room in set(found) | {r for v in found.values() for r in v}}


def test_the_rooms_of_interpret_import_each_other_in_one_direction():
    """interpret's sub-packages (bases, stats, probes, sweep, atlas, ...) form no circle: each room can be read,
    tested and replaced knowing only the rooms below it."""
    assert cycles(rooms(modules(), "proclab.interpret")) == []
    assert cycles(rooms({"proclab.interpret.a.x": {"proclab.interpret.b.y"},
                         "proclab.interpret.b.y": {"proclab.interpret.a.z"}}, "proclab.interpret")) == [["a", "b"]]  # fmt: skip


def command_modules() -> set[str]:
    """The modules that are a command line: registered as a command or an analysis' run function, or named
    ``command``, ``*_command`` or ``cli``."""
    from proclab.cli import COMMANDS  # lazy: the registries are read only by these tests
    from proclab.interpret.cli import ANALYSES

    registered = {module for module, _ in COMMANDS.values()} | {
        run.__module__ for _, run in ANALYSES.values()
    }
    named = {m for m in modules() if m.rsplit(".", 1)[-1] in ("command", "cli") or m.endswith("_command")}
    return registered | named


def test_no_library_module_imports_a_command_module():
    """Library code never reaches into a command line (parse -> call -> write: commands call the library);
    only the top layer (the CLI, the quickstart, proclab.analyze) and other commands import commands."""
    commands = command_modules()
    leaks = [
        f"{m} -> {t}"
        for m, targets in modules().items()
        for t in targets
        if t in commands and m not in commands and package(m) not in TOP
    ]
    assert not leaks
