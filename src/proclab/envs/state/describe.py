"""The reference tables of docs/ground-truth.md, generated from the code so they cannot drift.

``python -m proclab.envs.state.describe`` prints them; a test checks the page holds them verbatim.
"""

from __future__ import annotations

from proclab.envs.games import GAMES
from proclab.envs.state.features import event_names, feature_names
from proclab.envs.state.glossary import glossary
from proclab.envs.state.layout import BASIC_FIELDS, GAME_EXTRA_FIELDS, GAME_FIELDS
from proclab.envs.state.model import ENTITY_FIELDS

_KIND_NAMES = {"i": "int", "f": "float", "b": "bool", "s": "bytes", "rng": "RandGen", "ents": "list[Entity]"}


def _kind_name(kind: str) -> str:
    return f"tuple[{_KIND_NAMES[kind[1:]]}]" if kind.startswith("v") else _KIND_NAMES[kind]


def _field_list(spec) -> str:
    return ", ".join(f"`{name}` ({_kind_name(kind)})" for name, kind in spec) or "none"


def common_fields() -> str:
    return "\n".join(
        [
            "### Fields every game has",
            "",
            f"- `GameState.header` (procgen's `Game`): {_field_list(GAME_FIELDS)}.",
            f"- `GameState.basic` (procgen's `BasicAbstractGame`): {_field_list(BASIC_FIELDS)}.",
            f"- `Entity`: {_field_list(ENTITY_FIELDS)}; plus `kind` (glossary name, not serialized).",
            "",
        ]
    )


def game_section(game: str) -> str:
    names = glossary(game)
    entities = ", ".join(f"{t} `{kind}`" for t, kind in sorted(names.entities.items()))
    cells = ", ".join(f"{v} `{kind}`" for v, kind in sorted(names.cells.items()))
    return "\n".join(
        [
            f"### {game}",
            "",
            f"- Own fields (`GameState.extra`): {_field_list(GAME_EXTRA_FIELDS[game])}.",
            f"- Entity types: {entities}.",
            f"- Cell types: {cells}.",
            f"- Goal: {f'`{names.goal}`' if names.goal else 'none'}.",
            f"- Features ({len(feature_names(game))}): {', '.join(f'`{n}`' for n in feature_names(game))}.",
            f"- Events ({len(event_names(game))}): {', '.join(f'`{n}`' for n in event_names(game))}.",
            "",
        ]
    )


def markdown() -> str:
    return "\n".join([common_fields(), *(game_section(game) for game in GAMES)])


if __name__ == "__main__":
    print(markdown(), end="")
