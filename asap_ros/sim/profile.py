"""A "real robot" profile: how one simulated G1 differs from the nominal model.

YAML under ``config/profiles/`` (``load_profile("weak_knees")``) or any path. Joints and
bodies are named, never indexed; an unknown name is a :class:`ConfigError` naming it.

.. code-block:: yaml

    description: "..."                   # free text
    seed: 0                              # random seed (noise, dropped packets)
    torque_scale: {left_knee_joint: 0.6} # output torque factor per joint (1 = nominal)
    actuation_delay_s: 0.0               # a LowCmd takes effect this long after arrival
    joint_friction: {}                   # joint: dry friction N m (replaces the MJCF value)
    joint_damping: {}                    # joint: viscous damping N m s/rad (replaces the MJCF value)
    mass_offset_kg: {}                   # body: kg added (inertia scaled with the mass)
    sensor_noise: {q: 0, dq: 0, gyro: 0, quat: 0}  # std dev: rad, rad/s, rad/s, rad (rotation)
    command_drop_probability: 0.0        # a valid LowCmd is lost with this probability
    temperature:                         # first order: T -> ambient + rise_at_limit * (tau/limit)^2
      ambient_c: 25.0
      rise_at_limit_c: 100.0             # steady-state rise holding the effort limit
      time_constant_s: 120.0
      joints: {left_knee_joint: {time_constant_s: 60.0}}  # per-joint overrides
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.config.paths import config_file
from asap_ros.config.reader import ConfigReader, load_config

PROFILES_DIR = "profiles"
_KEYS = {
    "description", "seed", "torque_scale", "actuation_delay_s", "joint_friction", "joint_damping",
    "mass_offset_kg", "sensor_noise", "command_drop_probability", "temperature",
}
_NOISE_KEYS = ("q", "dq", "gyro", "quat")
_THERMAL_KEYS = ("rise_at_limit_c", "time_constant_s")


@dataclass(frozen=True)
class SensorNoise:
    """Standard deviations of the noise added to the LowState (not to the ground truth)."""

    q: float = 0.0
    dq: float = 0.0
    gyro: float = 0.0
    quat: float = 0.0
    """Rotation angle noise (rad) per axis, applied as a small rotation of the IMU quaternion."""


@dataclass(frozen=True)
class ThermalParams:
    """Per-joint first-order motor temperature model (arrays in motor order)."""

    ambient_c: float
    rise_at_limit_c: np.ndarray
    time_constant_s: np.ndarray


@dataclass(frozen=True)
class RobotProfile:
    """One simulated robot's deviations from the nominal model; arrays in motor order."""

    name: str
    source: str
    seed: int
    torque_scale: np.ndarray
    actuation_delay_s: float
    joint_friction: Mapping[str, float]
    joint_damping: Mapping[str, float]
    mass_offset_kg: Mapping[str, float]
    sensor_noise: SensorNoise
    command_drop_probability: float
    thermal: ThermalParams


def profile_path(name_or_path: str | Path) -> Path:
    """``config/profiles/<name>.yaml`` for a bare name, else the path itself."""
    text = str(name_or_path)
    if "/" in text or text.endswith((".yaml", ".yml")):
        return Path(text)
    return config_file(PROFILES_DIR) / f"{text}.yaml"


def load_profile(name_or_path: str | Path, joint_names: Sequence[str]) -> RobotProfile:
    """Read and validate a profile against the robot's joint names (body names: when applied)."""
    path = profile_path(name_or_path)
    cfg = load_config(path)
    cfg.reject_unknown(_KEYS)
    joints = list(joint_names)
    scale = np.ones(len(joints))
    for joint, value in cfg.joint_values("torque_scale", joints, default={}, low=0.0).items():
        scale[joints.index(joint)] = value
    mass_cfg = cfg.section("mass_offset_kg", {})
    return RobotProfile(
        name=path.stem,
        source=str(path),
        seed=cfg.int("seed", 0, low=0),
        torque_scale=scale,
        actuation_delay_s=cfg.float("actuation_delay_s", 0.0, low=0.0, high=1.0),
        joint_friction=cfg.joint_values("joint_friction", joints, default={}, low=0.0),
        joint_damping=cfg.joint_values("joint_damping", joints, default={}, low=0.0),
        mass_offset_kg={str(b): mass_cfg.float(str(b)) for b in mass_cfg.data},
        sensor_noise=_sensor_noise(cfg.section("sensor_noise", {})),
        command_drop_probability=cfg.float("command_drop_probability", 0.0, low=0.0, high=1.0),
        thermal=_thermal(cfg.section("temperature", {}), joints),
    )


def _sensor_noise(cfg: ConfigReader) -> SensorNoise:
    cfg.reject_unknown(set(_NOISE_KEYS))
    return SensorNoise(**{key: cfg.float(key, 0.0, low=0.0) for key in _NOISE_KEYS})


def _thermal(cfg: ConfigReader, joints: list[str]) -> ThermalParams:
    cfg.reject_unknown({"ambient_c", "joints", *_THERMAL_KEYS})
    columns = {
        "rise_at_limit_c": np.full(len(joints), cfg.float("rise_at_limit_c", 100.0, low=0.0)),
        "time_constant_s": np.full(len(joints), cfg.float("time_constant_s", 120.0, low=1e-3)),
    }
    per_joint = cfg.section("joints", {})
    cfg.check_joint_names("joints", per_joint.data, joints)
    for joint in per_joint.data:
        overrides = per_joint.section(str(joint))
        overrides.reject_unknown(set(_THERMAL_KEYS))
        for key in _THERMAL_KEYS:
            if overrides.has(key):
                low = 1e-3 if key == "time_constant_s" else 0.0
                columns[key][joints.index(str(joint))] = overrides.float(key, low=low)
    return ThermalParams(ambient_c=cfg.float("ambient_c", 25.0, low=-40.0, high=80.0), **columns)
