"""The README cannot go stale: its command table is regenerated from the CLI and compared, and
every documentation page is listed in it and in the site's navigation."""

import importlib.util
import re
from pathlib import Path

from proclab.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table_rows(text: str) -> list[str]:
    """The command names of the README's table, read back as a reader sees them."""
    return re.findall(r"^\| `proclab ([^`]+)` \|", text, flags=re.MULTILINE)


def test_readme_command_table_is_current():
    tool = load_tool("command_table")
    readme = README.read_text()
    assert tool.update(readme) == readme, "the command table is stale: run `make readme`"


def test_command_table_lists_every_registered_command():
    """Independent of the generator: every registered command (or its analyses) has a row."""
    names = table_rows(README.read_text())
    assert len(names) == len(set(names))
    for command in COMMANDS:
        assert command in names or any(n.startswith(command + " ") for n in names), command


def test_generator_updates_only_between_the_markers():
    tool = load_tool("command_table")
    text = f"intro\n{tool.START}\nold table\n{tool.END}\noutro\n"
    new = tool.update(text)
    assert new.startswith(f"intro\n{tool.START}\n| command |") and new.endswith(f"{tool.END}\noutro\n")
    assert "old table" not in new
    assert table_rows(new) == table_rows(README.read_text())


def test_every_docs_page_is_indexed_in_the_readme_and_the_site():
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}  # index.md is the site's front page
    readme_links = set(re.findall(r"\]\(docs/([\w.-]+\.md)\)", README.read_text()))
    assert pages <= readme_links, f"pages missing from the README's index: {sorted(pages - readme_links)}"
    nav = set(re.findall(r":\s*([\w.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), flags=re.MULTILINE))
    assert pages | {"index.md"} <= nav, f"pages missing from mkdocs.yml's nav: {sorted(pages - nav)}"
