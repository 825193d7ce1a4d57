"""docs/ground-truth.md holds the generated reference of every game's fields and names."""

from pathlib import Path

from proclab.envs.games import GAMES
from proclab.envs.state import glossary
from proclab.envs.state.describe import markdown

PAGE = Path(__file__).parents[3] / "docs" / "ground-truth.md"


def test_page_holds_the_generated_reference():
    text = PAGE.read_text()
    assert markdown() in text, "docs/ground-truth.md is stale: run python -m proclab.envs.state.describe"
    assert "## Cost in recording" in text


def test_generated_reference_names_every_glossary_entry():
    text = markdown()
    for game in GAMES:
        section = text.split(f"### {game}\n", 1)[1].split("\n### ", 1)[0]
        names = glossary(game)
        for value, kind in [*names.entities.items(), *names.cells.items()]:
            assert f"{value} `{kind}`" in section, (game, kind)
