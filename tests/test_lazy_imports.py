"""Imports inside functions hide a module's dependencies from its reader, so each one says why it is there.

Only a heavy optional dependency (scikit-learn, matplotlib, an optional backend) or a command's dispatch
(so that ``--help`` stays fast) is a reason; every other import belongs at the top of its module. The
reason is a comment starting with ``# lazy``, on the import's own line or on the comment lines just above
it; an import on the line right after an explained one (the same block) shares its reason.
"""

import ast
from pathlib import Path

import proclab

ROOT = Path(proclab.__file__).parent


def function_imports(tree: ast.AST) -> list[ast.stmt]:
    """The import statements inside functions (at any depth), in source order."""
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(tree, False)
    return sorted(found, key=lambda n: n.lineno)


def unexplained_imports(source: str) -> list[int]:
    """Line numbers of the function-level imports of ``source`` that carry no ``# lazy`` reason."""
    lines = source.splitlines()

    def commented(node: ast.stmt) -> bool:
        own = lines[node.lineno - 1 : node.end_lineno]
        if any("# lazy" in line for line in own):
            return True
        above = node.lineno - 2
        while above >= 0 and lines[above].lstrip().startswith("#"):
            if lines[above].lstrip().startswith("# lazy"):
                return True
            above -= 1
        return False

    explained_ends, missing = set(), []
    for node in function_imports(ast.parse(source)):
        if commented(node) or node.lineno - 1 in explained_ends:
            explained_ends.add(node.end_lineno)
        else:
            missing.append(node.lineno)
    return missing


PLANTED = """import os


def fit(x):
    # lazy: scikit-learn is slow to import, only the fits need it
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    import numpy as np

    # a comment that gives no reason
    import json

    import torch  # lazy: only this path needs it
    from proclab.store import (  # lazy: a command's dispatch
        EpisodeStore,
    )

    class Inner:
        def method(self):
            import re
"""


def test_checker_finds_planted_unexplained_imports():
    assert unexplained_imports(PLANTED) == [9, 12, 21]
    assert unexplained_imports("import numpy as np\n\n\ndef f():\n    return np\n") == []


def test_every_function_level_import_says_why():
    missing = [
        f"{path.relative_to(ROOT.parent)}:{line}"
        for path in sorted(ROOT.rglob("*.py"))
        for line in unexplained_imports(path.read_text())
    ]
    assert missing == [], "import at the top of the module, or say why it is lazy ('# lazy: ...')"
