"""The byte layout of procgen 0.10.7's game states, as field specs (see :mod:`.codec` for kinds).

A state is, in order: the ``Game`` header (``src/game.cpp``), the ``BasicAbstractGame`` fields
(``src/basic-abstract-game.cpp``) with the entity list after ``grid_size`` and the grid at the
end, then the game's own fields (``serialize`` of ``src/games/<game>.cpp``), then the int32
end marker that ``get_state`` appends (``src/vecgame.cpp``).
"""

from __future__ import annotations

SERIALIZE_VERSION = 0
END_OF_BUFFER = 0xCAFECAFE - 2**32  # written as a signed int32

_OPTIONS = (
    "paint_vel_info",
    "use_generated_assets",
    "use_monochrome_assets",
    "restrict_themes",
    "use_backgrounds",
    "center_agent",
    "debug_mode",
    "distribution_mode",
    "use_sequential_levels",
    "use_easy_jump",
    "plain_assets",
    "physics_mode",
)

# Game::serialize after the version int and the game name.
GAME_FIELDS: tuple[tuple[str, str], ...] = (
    *((name, "i") for name in _OPTIONS),
    *((name, "i") for name in ("grid_step", "level_seed_low", "level_seed_high", "game_type", "game_n")),
    ("level_seed_rand_gen", "rng"),
    ("rand_gen", "rng"),
    ("reward", "f"),
    ("done", "i"),
    ("level_complete", "i"),
    *((name, "i") for name in ("action", "timeout", "current_level_seed", "prev_level_seed")),
    *((name, "i") for name in ("episodes_remaining", "episode_done", "last_reward_timer")),
    ("last_reward", "f"),
    ("default_action", "i"),
    ("fixed_asset_seed", "i"),
    ("cur_time", "i"),
    ("is_waiting_for_step", "i"),
)

# BasicAbstractGame::serialize between the entity list and the grid.
BASIC_FIELDS: tuple[tuple[str, str], ...] = (
    ("use_procgen_background", "i"),
    ("background_index", "i"),
    ("bg_tile_ratio", "f"),
    ("bg_pct_x", "f"),
    ("char_dim", "f"),
    *((name, "i") for name in ("last_move_action", "move_action", "special_action")),
    *((name, "f") for name in ("mixrate", "maxspeed", "max_jump", "action_vx", "action_vy", "action_vrot")),
    ("center_x", "f"),
    ("center_y", "f"),
    *((name, "i") for name in ("random_agent_start", "has_useful_vel_info", "step_rand_int")),
    ("asset_rand_gen", "rng"),
    *((name, "i") for name in ("main_width", "main_height", "out_of_bounds_object")),
    *((name, "f") for name in ("unit", "view_dim", "x_off", "y_off", "visibility", "min_visibility")),
)


def _spec(text: str) -> tuple[tuple[str, str], ...]:
    """``"kind name, kind name"`` -> spec; the tables below read like the C++ they mirror."""
    return tuple((pair.split()[1], pair.split()[0]) for pair in text.split(",") if pair.strip())


# Each game's own fields, in the order of its serialize().
GAME_EXTRA_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "bigfish": _spec("i fish_eaten, f r_inc"),
    "bossfight": _spec(
        "vi attack_modes, i last_fire_time, i time_to_swap, i invulnerable_duration, i vulnerable_duration,"
        "i num_rounds, i round_num, i round_health, i boss_vel_timeout, i curr_vel_timeout, i attack_mode,"
        "i player_laser_theme, i boss_laser_theme, i damaged_until_time, b shields_are_up,"
        "b barriers_moves_right, f base_fire_prob, f boss_bullet_vel, f barrier_vel, f barrier_spawn_prob,"
        "f rand_pct, f rand_fire_pct, f rand_pct_x, f rand_pct_y"
    ),
    "caveflyer": (),
    "chaser": _spec(
        "vi free_cells, vb is_space_vec, i eat_timeout, i egg_timeout, i eat_time, i total_enemies,"
        "i total_orbs, i orbs_collected, i maze_dim"
    ),
    "climber": _spec(
        "b has_support, b facing_right, i coin_quota, i coins_collected, i wall_theme, f gravity, f air_control"
    ),
    "coinrun": _spec(
        "f last_agent_y, i wall_theme, b has_support, b facing_right, b is_on_crate, f gravity, f air_control"
    ),
    "dodgeball": _spec(
        "f min_dim, f hard_min_dim, f ball_vscale, f ball_r, i last_fire_time, i num_enemies, i enemy_fire_delay"
    ),
    "fruitbot": _spec("f min_dim, f bullet_vscale, i last_fire_time"),
    "heist": _spec("i num_keys, i world_dim, vb has_keys"),
    "jumper": _spec(
        "i jump_count, i jump_delta, i jump_time, b has_support, b facing_right, i wall_theme, f compass_dim"
    ),
    "leaper": _spec("i bottom_road_y, vf road_lane_speeds, i bottom_water_y, vf water_lane_speeds, i goal_y"),
    "maze": _spec("i maze_dim, i world_dim"),
    "miner": _spec("i diamonds_remaining"),
    "ninja": _spec(
        "b has_support, b facing_right, i last_fire_time, i wall_theme, f gravity, f air_control,"
        "f jump_charge, f jump_charge_inc"
    ),
    "plunder": _spec(
        "i last_fire_time, vb lane_directions, vb target_bools, vi image_permutation, vf lane_vels,"
        "i num_lanes, i num_current_ship_types, i targets_hit, i target_quota, f juice_left, f r_scale,"
        "f spawn_prob, f legend_r, f min_agent_x"
    ),
    "starpilot": _spec("ents spawners"),
}
