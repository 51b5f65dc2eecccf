"""What the doctor checks against: the deploy node's network and files, the controller's safety
limits, the robot model, the recorder's socket buffer, and the operator's options."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from asap_ros.config.controller import load_controller_config
from asap_ros.config.node_params import DEPLOY_PARAMS, load_defaults
from asap_ros.config.paths import config_file
from asap_ros.config.policy_spec import resolve_policy_files
from asap_ros.config.robot import load_robot_model
from asap_ros.core.controller import ControllerConfig
from asap_ros.core.robot import RobotModel

CHECK_GROUPS = ("network", "lowstate", "lowcmd", "ros", "assets", "time")
ROBOT_SUBNET = "192.168.123.0/24"
LOWSTATE_RATE_HZ = 500.0
"""The G1's rt/lowstate rate."""
EXPECTED_RMW = "rmw_cyclonedds_cpp"


@dataclass(frozen=True)
class DoctorSettings:
    interface: str
    domain: int
    subnet: ipaddress.IPv4Network
    duration_s: float
    lowstate_rate_hz: float
    mode_machine: int | None
    rmw: str
    controller: ControllerConfig
    robot: RobotModel
    policies: tuple[Path, ...]
    assets_dir: str | None
    receive_buffer_bytes: int
    groups: tuple[str, ...]

    def describe(self) -> dict:
        """The settings as JSON-able values (for ``--json``)."""
        return {
            "interface": self.interface, "domain": self.domain, "subnet": str(self.subnet),
            "duration_s": self.duration_s, "lowstate_rate_hz": self.lowstate_rate_hz,
            "mode_machine": self.mode_machine, "rmw": self.rmw, "controller_config": self.controller.source,
            "robot_config": self.robot.source, "policies": [str(p) for p in self.policies],
            "assets_dir": self.assets_dir, "receive_buffer_bytes": self.receive_buffer_bytes,
            "checks": list(self.groups),
        }  # fmt: skip


def deploy_defaults() -> dict:
    """``config/deploy.yaml``: the network, domain and files asap_deploy starts with."""
    from asap_ros.ros.deploy_node import NODE_NAME

    return load_defaults(config_file("deploy.yaml"), NODE_NAME, DEPLOY_PARAMS)


def recorder_receive_buffer_bytes() -> int:
    from asap_ros.recording.config import NODE_NAME, RECORDER_PARAMS

    return int(load_defaults(config_file("recorder.yaml"), NODE_NAME, RECORDER_PARAMS)["receive_buffer_mb"] * 1e6)


def load_settings(
    *, interface: str | None = None, domain: int | None = None, subnet: str = ROBOT_SUBNET, duration_s: float = 3.0,
    lowstate_rate_hz: float = LOWSTATE_RATE_HZ, mode_machine: int | None = None, rmw: str = EXPECTED_RMW,
    controller_config: str | None = None, robot_config: str | None = None, policies: list[str] | None = None,
    assets_dir: str | None = None, groups: tuple[str, ...] = CHECK_GROUPS,
) -> DoctorSettings:
    """Options given override the deploy node's defaults; a bad value raises :class:`ValueError`."""
    deploy = deploy_defaults()
    controller = load_controller_config(controller_config or deploy["controller_config"] or None)
    spec_names = policies if policies is not None else deploy["policies"]
    specs = resolve_policy_files(spec_names, "--policy" if policies is not None else "config/deploy.yaml")
    if controller.hold_policy is not None and policies is None:
        specs.append(controller.hold_policy)
    unknown = sorted(set(groups) - set(CHECK_GROUPS))
    if unknown:
        raise ValueError(f"unknown checks {', '.join(unknown)} (known: {', '.join(CHECK_GROUPS)})")
    if duration_s <= 0 or lowstate_rate_hz <= 0:
        raise ValueError(f"--duration and --lowstate-rate must be > 0, got {duration_s} and {lowstate_rate_hz}")
    if mode_machine is not None and not 0 <= mode_machine <= 255:
        raise ValueError(f"--mode-machine must be 0..255, got {mode_machine}")
    return DoctorSettings(
        interface=interface or deploy["network_interface"],
        domain=deploy["dds_domain"] if domain is None else domain,
        subnet=ipaddress.IPv4Network(subnet, strict=False),
        duration_s=duration_s, lowstate_rate_hz=lowstate_rate_hz, mode_machine=mode_machine, rmw=rmw,
        controller=controller, robot=load_robot_model(robot_config or deploy["robot_config"] or None),
        policies=tuple(specs), assets_dir=assets_dir or deploy["assets_dir"] or None,
        receive_buffer_bytes=recorder_receive_buffer_bytes(), groups=tuple(g for g in CHECK_GROUPS if g in groups),
    )  # fmt: skip
