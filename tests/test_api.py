"""The public API: every name proclab exports resolves lazily, has a docstring, and is on docs/api.md; every
analysis has the one call shape."""

import ast
import dataclasses
import inspect
import itertools
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import proclab

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def documented() -> set[str]:
    return set(re.findall(r"^::: ([\w.]+)", API_PAGE.read_text(), flags=re.M))


def exported(namespace, names) -> list[tuple[str, object]]:
    return [(n, getattr(namespace, n)) for n in names if not n.startswith("__")]


def test_every_public_name_has_a_docstring_and_a_place_on_the_api_page():
    page = documented()
    missing, bare = [], []
    for space in (proclab, proclab.analyze, proclab.stats):
        for name, value in exported(space, space.__all__):
            if name in ("analyze", "stats"):
                assert f"proclab.{name}" in page
                continue
            if not (getattr(value, "__doc__", None) or "").strip():
                bare.append(name)
            where = f"{value.__module__}.{value.__qualname__}" if hasattr(value, "__qualname__") else name
            if where not in page:
                missing.append(where)
    assert not bare, f"public names without a docstring: {bare}"
    assert not missing, f"public names missing from docs/api.md: {missing}"


def test_the_api_page_names_only_what_exists():
    for target in documented():
        module, _, attr = target.rpartition(".")
        try:
            __import__(target)  # a module
            continue
        except ImportError:
            pass
        assert hasattr(__import__(module, fromlist=[attr]), attr), target


def test_importing_proclab_loads_nothing_heavy():
    code = "import sys, proclab; print(sorted(m for m in ('torch', 'numpy', 'sklearn') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert set(dir(proclab)) == set(proclab.__all__)


HELPERS = {"goal_calls", "goal_targets", "maze_episodes", "random_agent", "score_goal_calls"}
"""The functions of proclab.analyze that are no analysis: small typed helpers with signatures of their own."""


def analyses() -> list[tuple[str, object]]:
    space = proclab.analyze
    return [
        (name, value)
        for name, value in exported(space, space.__all__)
        if inspect.isfunction(value) and name not in HELPERS
    ]


def field_docs(cls) -> set[str]:
    """The fields of dataclass ``cls`` (or of the dataclasses it extends) that have an attribute docstring (what
    the API page shows per field)."""
    found = set()
    for klass in (k for k in cls.__mro__ if dataclasses.is_dataclass(k)):
        (body,) = ast.parse(textwrap.dedent(inspect.getsource(klass))).body
        found |= {
            a.target.id
            for a, b in itertools.pairwise(body.body)
            if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value.value, str)
        }
    return found


def test_every_analysis_has_the_one_call_shape():
    """analyze.X(subject, hook, *, objects..., settings=XSettings(...), progress=True): the subject first and
    positional, ``hook`` second where there is one, every other parameter keyword-only, the options in a frozen
    settings dataclass validated by ``check()`` and documented field by field, one progress switch."""
    found = analyses()
    assert len(found) >= 11
    for name, fn in found:
        params = list(inspect.signature(fn).parameters.values())
        positional = [p for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in positional), name
        assert positional[0].default is inspect.Parameter.empty, f"{name}: the subject has no default"
        assert [p.name for p in positional[1:]] in ([], ["hook"]), (
            f"{name}: only the hook follows the subject"
        )
        keywords = {p.name: p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert "phase" not in keywords, name
        settings = keywords["settings"].default
        assert dataclasses.is_dataclass(settings) and type(settings).__dataclass_params__.frozen, name
        assert type(settings).__name__.endswith("Settings"), name
        settings.check()  # the defaults are valid
        undocumented = {f.name for f in dataclasses.fields(settings)} - field_docs(type(settings))
        assert not undocumented, f"{type(settings).__name__}: fields without a docstring: {undocumented}"
        progress = keywords["progress"]
        assert progress.annotation in (bool, "bool") and progress.default is True, name
        assert list(keywords)[-2:] == ["settings", "progress"], f"{name}: settings and progress come last"


def reachable_functions() -> dict[str, object]:
    """Every function a user reaches from the exported names: the exported functions, and the public methods and
    properties (with ``__init__`` and ``__call__``) of the exported classes, those proclab defines (torch's
    ``nn.Module`` methods of an agent are torch's to type)."""
    found = {}
    for space in (proclab, proclab.analyze, proclab.stats):
        for _, value in exported(space, space.__all__):
            if inspect.isfunction(value):
                found[f"{value.__module__}.{value.__qualname__}"] = value
            if not inspect.isclass(value):
                continue
            for klass in (k for k in value.__mro__ if k.__module__.startswith("proclab")):
                for attr, raw in vars(klass).items():
                    fn = raw.fget if isinstance(raw, property) else getattr(raw, "__func__", raw)
                    public = not attr.startswith("_") or attr in ("__init__", "__call__")
                    if public and inspect.isfunction(fn) and fn.__module__.startswith("proclab"):
                        found[f"{fn.__module__}.{fn.__qualname__}"] = fn
    return found


def unannotated(fn) -> list[str]:
    """The parameters of ``fn`` without an annotation (a method's ``self`` or ``cls`` excepted), and
    ``return`` when its result has none."""
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    missing = [p.name for p in params if p.annotation is inspect.Parameter.empty]
    if inspect.signature(fn).return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def test_every_public_function_and_method_is_annotated():
    """pyright checks the public API in CI (make typecheck); this keeps its signatures typed where pyright is
    not run: every parameter and every return of what the exported names reach is annotated."""
    found = reachable_functions()
    assert len(found) > 100
    bare = {where: missing for where, fn in found.items() if (missing := unannotated(fn))}
    assert not bare, f"public functions with unannotated parameters or returns: {bare}"


def test_the_type_checkers_names_are_the_lazy_exports():
    """``proclab/__init__.py`` imports its lazy names under ``if TYPE_CHECKING:`` for type checkers (PEP 562's
    ``__getattr__`` tells them nothing): the same names from the same modules as ``_EXPORTS`` and
    ``_MODULES``."""
    tree = ast.parse(Path(proclab.__file__).read_text())
    (block,) = [
        n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING"
    ]
    imported = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name}: re-exported as itself (`import X as X`)"
            imported[alias.name] = node.module if node.module != "proclab" else f"proclab.{alias.name}"
    assert imported == {**proclab._EXPORTS, **proclab._MODULES}
