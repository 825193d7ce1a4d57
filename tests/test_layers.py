"""The package's layers, read from the source: lower layers never import higher ones, nothing outside
``rl`` uses it except to train or to act, no two modules import each other (even lazily), and the
command line stays apart from the library (commands in command modules, the library never taking a parser's
object nor importing a command)."""

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
    {"cli", "__main__", "quickstart", "analyze", "command"},
]
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}
TOP = LAYERS[-1]
# the PPO trainer with its configs (reward/policy.py trains PPO on a learned reward), the actor (recording),
# populations of PPO runs (exported by `proclab` as train_population) and the evaluation of many agents (exported
# as evaluate_agents, with its settings)
RL_FOR_OTHERS = {
    "proclab.rl.ppo_train",
    "proclab.rl.config",
    "proclab.rl.rollout",
    "proclab.rl.population",
    "proclab.rl.evaluations",
    "proclab.rl.evaluate",
}


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


def sources() -> dict[str, Path]:
    """Every module of proclab and its file."""
    return {module_name(p): p for p in ROOT.rglob("*.py")}


def modules() -> dict[str, set[str]]:
    """Every module of proclab and the proclab modules it imports when run (at the top or inside functions);
    the top-level ``proclab`` also imports, by name, the modules of its lazy exports (``_EXPORTS``,
    ``_MODULES``: PEP 562 imports that no import statement shows)."""
    found = sources()
    graph = {}
    for name, path in found.items():
        targets = set()
        for node in runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("proclab"):
                for alias in node.names:  # `from proclab.rl import ppo` imports the module proclab.rl.ppo
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if sub in found else node.module)
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith("proclab")}
        graph[name] = {t for t in targets if t in found and t != name}
    graph["proclab"] |= set(proclab._EXPORTS.values()) | set(proclab._MODULES.values())
    return graph


def test_the_lazy_exports_are_imports_of_the_top_level_module():
    graph = modules()
    assert {"proclab.models.loading", "proclab.analyze"} <= graph["proclab"]
    assert set(proclab._EXPORTS.values()) <= set(graph), "an export names a module that does not exist"


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
    """The modules that are a command line: ``proclab.cli`` (the entry point) and every package's
    ``command`` module (docs/architecture.md, "Conventions of the command line")."""
    return {m for m in sources() if m == "proclab.cli" or m.rsplit(".", 1)[-1] == "command"}


def test_every_command_lives_in_a_command_module():
    """Each registered command, each analysis' arguments and run function, and every ``main`` or
    ``NAME_command`` function is in a command module: where a command is, is known from its package alone."""
    from proclab.cli import COMMANDS  # lazy: the registries are read only by these tests
    from proclab.interpret.command import ANALYSES

    commands = command_modules()
    registered = {target.split(":")[0] for target, _ in COMMANDS.values()} | {
        f.__module__ for pair in ANALYSES.values() for f in pair
    }
    assert registered - commands == set()
    runners = {
        m
        for m, path in sources().items()
        for n in ast.parse(path.read_text()).body
        if isinstance(n, ast.FunctionDef) and (n.name == "main" or n.name.endswith("_command"))
    }
    assert runners - commands == set()


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


def annotated_names(node: ast.AST | None) -> set[str]:
    """The names an annotation mentions (``RecordArgs``, ``x.RecordArgs``, ``type[AnalysisArgs] | None``, or
    the same quoted)."""
    if node is None:
        return set()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return annotated_names(ast.parse(node.value, mode="eval").body)
    return {
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Name | ast.Attribute)
    }


def parser_objects(source: str) -> list[str]:
    """What in ``source`` defines or accepts a parser's object: classes named ``...Args``, and parameters
    annotated with such a class."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name.endswith("Args"):
            found.append(f"class {node.name}")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None and any(n.endswith("Args") for n in annotated_names(arg.annotation)):
                    found.append(f"{getattr(node, 'name', 'lambda')}({arg.arg})")
    return found


def test_parser_objects_are_found_in_a_planted_module():
    planted = (
        "class RecordArgs: ...\n"
        "def run(args: RecordArgs, *, more: 'x.PlayArgs | None' = None): ...\n"
        "def fine(settings: RecordSettings, cls: type[Arguments]): ...\n"
        "def defaults(cls: type[AnalysisArgs]): ...\n"
    )
    assert parser_objects(planted) == ["class RecordArgs", "run(args)", "run(more)", "defaults(cls)"]


def test_no_library_module_defines_or_accepts_a_parsers_object():
    """A library function takes the library's settings (frozen dataclasses), never a command's arguments: the
    command turns what it parsed into them."""
    commands = command_modules()
    found = {
        m: objects
        for m, path in sources().items()
        if m not in commands and (objects := parser_objects(path.read_text()))
    }
    assert found == {}
