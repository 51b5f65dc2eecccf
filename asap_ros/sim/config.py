"""Simulator settings (``config/sim.yaml``), validated with file/key/value errors."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from asap_ros.config.paths import config_file
from asap_ros.config.reader import ConfigReader, load_config
from asap_ros.core.errors import ConfigError

DEFAULT_FILE = "sim.yaml"
MIN_PHYSICS_RATE_HZ = 200.0
_ROS_TOPIC = re.compile(r"/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*")
"""A ROS 2 topic name without substitutions: tokens of ``[A-Za-z0-9_]``, none starting with a digit."""


@dataclass(frozen=True)
class BandConfig:
    """Elastic band (as ASAP / unitree_mujoco): a damped spring from an anchor above the robot.

    It pulls at ``point_m`` in the frame of ``body``. ASAP pulls at the pelvis centre of mass
    (``body: pelvis, point_m: [0, 0, -0.076]``), which lets a limp G1 flip over: the whole
    robot's centre of mass is above that point. The default hangs the torso from a point
    above it, like a harness.
    """

    enabled: bool = True
    body: str = "torso_link"
    point_m: tuple[float, float, float] = (0.0, 0.0, 0.25)
    stiffness: float = 200.0
    damping: float = 100.0
    anchor_height_m: float = 3.0
    start_support: float = 1.0
    """Fraction of the robot's weight the band carries at the start pose (sets its rest length)."""
    lower_step_m: float = 0.1


@dataclass(frozen=True)
class MocapConfig:
    """Simulated motion capture of the pelvis (``rate_hz`` 0: off); ``topic`` a ROS 2 name,
    relative ones in the root namespace."""

    rate_hz: float = 200.0
    latency_ms: float = 5.0
    position_noise_m: float = 0.0
    orientation_noise_rad: float = 0.0
    dropout: float = 0.0
    topic: str = "mocap/pose"
    frame_id: str = "world"


@dataclass(frozen=True)
class SimConfig:
    model: str = "robots/g1/scene_29dof.xml"
    robot: str = "g1_29dof.yaml"
    physics_rate_hz: float = 500.0
    lowstate_rate_hz: float = 500.0
    lowstate_lead_ms: float = 0.6
    """Each LowState's physics step starts this long before a multiple of the LowState period on
    the monotonic clock (see ``config/sim.yaml``); in [0, LowState period)."""
    mode_machine: int = 5
    command_timeout_s: float = 0.1
    profile: str = "nominal"
    band: BandConfig = BandConfig()
    mocap: MocapConfig = MocapConfig()
    source: str = "<defaults>"

    @property
    def lowstate_decimation(self) -> int:
        """Physics steps per published LowState."""
        return round(self.physics_rate_hz / self.lowstate_rate_hz)


def load_sim_config(path: str | Path | None = None) -> SimConfig:
    """Read ``config/sim.yaml`` (or ``path``)."""
    path = Path(path) if path is not None else config_file(DEFAULT_FILE)
    cfg = load_config(path)
    cfg.reject_unknown({f for f in SimConfig.__dataclass_fields__ if f != "source"})
    band, mocap = cfg.section("band", {}), cfg.section("mocap", {})
    band.reject_unknown(set(BandConfig.__dataclass_fields__))
    mocap.reject_unknown(set(MocapConfig.__dataclass_fields__))
    config = SimConfig(
        model=cfg.str("model", SimConfig.model),
        robot=cfg.str("robot", SimConfig.robot),
        physics_rate_hz=cfg.float("physics_rate_hz", SimConfig.physics_rate_hz, low=MIN_PHYSICS_RATE_HZ),
        lowstate_rate_hz=cfg.float("lowstate_rate_hz", SimConfig.lowstate_rate_hz, low=1.0),
        lowstate_lead_ms=cfg.float("lowstate_lead_ms", SimConfig.lowstate_lead_ms, low=0.0),
        mode_machine=cfg.int("mode_machine", SimConfig.mode_machine, low=0, high=255),
        command_timeout_s=cfg.float("command_timeout_s", SimConfig.command_timeout_s, low=0.001),
        profile=cfg.str("profile", SimConfig.profile),
        band=_band(band),
        mocap=_mocap(mocap),
        source=str(path),
    )
    check_sim_config(config)
    return config


def check_sim_config(config: SimConfig) -> None:
    """Cross-field checks (also run on configs changed by command-line overrides)."""
    if config.physics_rate_hz < MIN_PHYSICS_RATE_HZ:
        raise ConfigError(
            config.source, "physics_rate_hz", f"must be >= {MIN_PHYSICS_RATE_HZ:g}", config.physics_rate_hz
        )
    ratio = config.physics_rate_hz / config.lowstate_rate_hz
    if ratio < 1 or not math.isclose(ratio, round(ratio), rel_tol=1e-9):
        raise ConfigError(
            config.source, "lowstate_rate_hz",
            f"must divide physics_rate_hz {config.physics_rate_hz:g} into whole steps", config.lowstate_rate_hz,
        )
    lowstate_period_ms = 1e3 / config.lowstate_rate_hz
    if not 0 <= config.lowstate_lead_ms < lowstate_period_ms:
        raise ConfigError(config.source, "lowstate_lead_ms", f"must be in [0, {lowstate_period_ms:g}) "
                          "(the LowState period)", config.lowstate_lead_ms)
    if not 0 <= config.mode_machine <= 255:
        raise ConfigError(config.source, "mode_machine", "must be 0..255", config.mode_machine)
    mocap = config.mocap
    for key, value, low, high in (
        ("mocap.rate_hz", mocap.rate_hz, 0.0, 10_000.0),
        ("mocap.latency_ms", mocap.latency_ms, 0.0, 10_000.0),
        ("mocap.position_noise_m", mocap.position_noise_m, 0.0, 1.0),
        ("mocap.dropout", mocap.dropout, 0.0, 1.0),
    ):
        if not low <= value <= high:
            raise ConfigError(config.source, key, f"must be in [{low:g}, {high:g}]", value)
    if not _ROS_TOPIC.fullmatch(mocap.topic):
        raise ConfigError(config.source, "mocap.topic",
                          "must be a ROS 2 topic name: '/'-separated tokens of letters, digits and '_', "
                          "none starting with a digit", mocap.topic)


def _band(cfg: ConfigReader) -> BandConfig:
    d = BandConfig()
    return BandConfig(
        enabled=cfg.bool("enabled", d.enabled),
        body=cfg.str("body", d.body),
        point_m=tuple(cfg.floats("point_m", list(d.point_m), length=3)),
        stiffness=cfg.float("stiffness", d.stiffness, low=0.0),
        damping=cfg.float("damping", d.damping, low=0.0),
        anchor_height_m=cfg.float("anchor_height_m", d.anchor_height_m, low=0.0),
        start_support=cfg.float("start_support", d.start_support, low=0.0, high=1.0),
        lower_step_m=cfg.float("lower_step_m", d.lower_step_m, low=0.0),
    )


def _mocap(cfg: ConfigReader) -> MocapConfig:
    d = MocapConfig()
    return MocapConfig(
        rate_hz=cfg.float("rate_hz", d.rate_hz, low=0.0),
        latency_ms=cfg.float("latency_ms", d.latency_ms, low=0.0),
        position_noise_m=cfg.float("position_noise_m", d.position_noise_m, low=0.0),
        orientation_noise_rad=cfg.float("orientation_noise_rad", d.orientation_noise_rad, low=0.0),
        dropout=cfg.float("dropout", d.dropout, low=0.0, high=1.0),
        topic=cfg.str("topic", d.topic),
        frame_id=cfg.str("frame_id", d.frame_id),
    )
