"""Loads the G1 robot model (:class:`~asap_ros.core.robot.RobotModel`) from ``config/g1_29dof.yaml``."""

from __future__ import annotations

from pathlib import Path

from asap_ros.config.paths import config_file
from asap_ros.config.reader import load_config
from asap_ros.core.robot import RobotModel, frozen_array
from asap_ros.core.state import NUM_MOTORS

DEFAULT_FILE = "g1_29dof.yaml"


def load_robot_model(path: str | Path | None = None) -> RobotModel:
    """Load a robot model (default: the package's ``config/g1_29dof.yaml``)."""
    path = Path(path) if path is not None else config_file(DEFAULT_FILE)
    cfg = load_config(path)
    cfg.reject_unknown({"name", "joints", "groups"})
    rows = cfg.sections("joints")
    if len(rows) != NUM_MOTORS:
        raise cfg.error("joints", f"must list {NUM_MOTORS} motors, lists {len(rows)}", len(rows))
    columns: dict[str, list[float]] = {k: [] for k in ("q_min", "q_max", "dq_max", "tau_max", "default_q", "kp", "kd")}
    names: list[str] = []
    for row in rows:
        row.reject_unknown({"name", *columns})
        names.append(row.str("name"))
        for key in ("dq_max", "tau_max", "kp", "kd"):
            columns[key].append(row.float(key, low=0.0))
        q_min, q_max = row.float("q_min"), row.float("q_max")
        if q_min >= q_max:
            raise row.error("q_max", f"must be greater than q_min {q_min}", q_max)
        columns["q_min"].append(q_min)
        columns["q_max"].append(q_max)
        columns["default_q"].append(row.float("default_q", low=q_min, high=q_max))
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise cfg.error("joints", "duplicate joint names", duplicates)
    groups_cfg = cfg.section("groups", {})
    groups = {str(g): groups_cfg.joint_names(str(g), names) for g in groups_cfg.data}
    return RobotModel(
        name=cfg.str("name"),
        joint_names=tuple(names),
        q_lower=frozen_array(columns["q_min"]),
        q_upper=frozen_array(columns["q_max"]),
        dq_limit=frozen_array(columns["dq_max"]),
        tau_limit=frozen_array(columns["tau_max"]),
        default_q=frozen_array(columns["default_q"]),
        kp=frozen_array(columns["kp"]),
        kd=frozen_array(columns["kd"]),
        groups=groups,
        source=str(path),
    )
