"""Loads the controller config (``config/controller.yaml``): mode timings, passive/damping
gains, the standing actor's spec and the safety thresholds, validated with errors naming file,
key and value."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from asap_ros.config.paths import config_file, policies_dir
from asap_ros.config.reader import ConfigReader, load_config
from asap_ros.core.controller import ControllerConfig
from asap_ros.core.robot import frozen_array
from asap_ros.core.safety import SafetyConfig
from asap_ros.core.state import NUM_MOTORS

DEFAULT_FILE = "controller.yaml"

Bounds = tuple[float | None, float | None]
"""``(low, high)`` of a number; ``None``: unbounded on that side."""

SAFETY_BOUNDS: dict[str, Bounds] = {
    "max_state_age_ms": (1.0, 1000.0),
    "position_margin_rad": (0.0, None),
    "velocity_limit_factor": (0.1, None),
    "max_tilt_deg": (1.0, 180.0),
    "max_temperature_c": (20.0, 150.0),
    "max_start_temperature_c": (20.0, 150.0),
    "max_consecutive_late_steps": (1, None),
    "max_consecutive_bad_crc": (1, None),
}
"""Allowed range of each ``safety`` threshold, wherever it is set: this file, an ``asap_deploy``
override parameter (:mod:`asap_ros.config.node_params`)."""

STAND_UP_DURATION_S: Bounds = (0.5, 60.0)
"""Allowed range of ``stand_up.duration_s`` (and of its overrides: the deploy parameter, ``--stand-up-s``)."""


def read_safety_config(section: ConfigReader) -> SafetyConfig:
    """Validate the ``safety`` section of the controller config."""
    fields = SafetyConfig.__dataclass_fields__
    section.reject_unknown(fields)
    values = {}
    for name, field in fields.items():
        low, high = SAFETY_BOUNDS[name]
        read = section.int if field.type == "int" else section.float  # annotations are strings here
        values[name] = read(name, low=low, high=high)
    config = SafetyConfig(**values)
    if config.max_start_temperature_c > config.max_temperature_c:
        raise section.error(
            "max_start_temperature_c",
            f"must not exceed max_temperature_c ({config.max_temperature_c})",
            config.max_start_temperature_c,
        )
    return config


def _per_motor(section: ConfigReader, name: str) -> np.ndarray:
    """One non-negative number for every motor, or a list of 29 in motor order."""
    if isinstance(section.raw(name), list):
        return frozen_array(section.floats(name, length=NUM_MOTORS, low=0.0))
    return frozen_array(np.full(NUM_MOTORS, section.float(name, low=0.0)))


def _section(cfg: ConfigReader, name: str, keys: set[str]) -> ConfigReader:
    section = cfg.section(name)
    section.reject_unknown(keys)
    return section


def load_controller_config(path: str | Path | None = None) -> ControllerConfig:
    """Load and validate the controller config (default: the package's ``config/controller.yaml``)."""
    path = Path(path) if path is not None else config_file(DEFAULT_FILE)
    cfg = load_config(path)
    cfg.reject_unknown({"stand_up", "hold", "passive", "damping", "safety"})
    stand_up = _section(cfg, "stand_up", {"duration_s", "kp_start_fraction"})
    hold = _section(cfg, "hold", {"return_blend_s", "policy"})
    passive = _section(cfg, "passive", {"kd"})
    damping = _section(cfg, "damping", {"kd"})
    return ControllerConfig(
        stand_up_duration_s=stand_up.float("duration_s", low=STAND_UP_DURATION_S[0], high=STAND_UP_DURATION_S[1]),
        stand_up_kp_start_fraction=stand_up.float("kp_start_fraction", low=0.0, high=1.0),
        return_blend_s=hold.float("return_blend_s", low=0.1),
        passive_kd=_per_motor(passive, "kd"),
        damping_kd=_per_motor(damping, "kd"),
        safety=read_safety_config(cfg.section("safety")),
        source=str(path),
        hold_policy=_hold_policy(hold),
    )


def _hold_policy(hold: ConfigReader) -> Path | None:
    """``hold.policy``: a spec path (relative to the package's ``policies/``), or null/absent."""
    if hold.raw("policy", None) is None:
        return None
    path = policies_dir() / hold.str("policy")  # an absolute path replaces the base
    if not path.is_file():
        raise hold.error("policy", f"policy spec not found (relative paths are under {policies_dir()})", str(path))
    return path
