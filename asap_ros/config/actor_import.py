"""``asap-ros policy import``: a policy spec written from a trainer's ONNX file.

What the trainer puts in the file's ``metadata_props`` is taken from there; what it does not is
taken from that trainer's documented defaults or from flags. Every value of the written spec is
listed in its ``sources`` section with where it came from. Trainers:

- ``beyondmimic`` (HybridRobotics whole_body_tracking, ``utils/exporter.py``): comma-separated
  strings, rounded to 3 decimals, of ``joint_names`` (IsaacLab order), ``joint_stiffness``,
  ``joint_damping``, ``default_joint_pos``, ``action_scale``, ``observation_names``,
  ``anchor_body_name``, ``body_names``; inputs ``obs`` and ``time_step``; the motion is in the model
  (its length is probed: the first ``time_step`` from which ``joint_pos`` stops changing).
- ``holosoma`` (amazon-far holosoma): JSON ``kp``, ``kd``, ``dof_names``, ``command_ranges``; the
  default pose, action scale, observation terms and gait period are holosoma_inference 0.1.3's
  defaults for the G1 (``config_values/robot.py`` ``g1_29dof``, ``observation.py``
  ``loco_g1_29dof``, ``task.py`` ``locomotion``).
- ``asap`` (ASAP and ASAP-family files such as KungfuBot/PBHC): no metadata; ASAP's 380-wide
  layout for 23 driven joints; gains and default pose from the robot model or ``--gains``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from asap_ros.config.actor_model import ActorFile, open_actor_file
from asap_ros.config.actor_spec import TRAINERS
from asap_ros.config.reader import load_config
from asap_ros.core.actor_contract import (
    PRECISION_TOLERANCE,
    bind_joints,
    check_obs_dims,
    check_per_joint,
    precision_problem,
    require_all_motors,
)  # fmt: skip
from asap_ros.core.errors import ConfigError
from asap_ros.core.policy_spec import ObsTerm
from asap_ros.core.robot import RobotModel

HOLOSOMA_DEFAULTS = "holosoma_inference 0.1.3 default for g1_29dof"
HOLOSOMA_DEFAULT_Q = (
    -0.312, 0.0, 0.0, 0.669, -0.363, 0.0,  -0.312, 0.0, 0.0, 0.669, -0.363, 0.0,  0.0, 0.0, 0.0,
    0.2, 0.2, 0.0, 0.6, 0.0, 0.0, 0.0,  0.2, -0.2, 0.0, 0.6, 0.0, 0.0, 0.0,
)  # fmt: skip
"""holosoma's ``default_dof_angles`` (rad) in its ``dof_names`` order (the SDK's motor order)."""
HOLOSOMA_TERMS = {
    "actions": ("joints", 1.0), "base_ang_vel": (3, 0.25), "command_ang_vel": (1, 1.0),
    "command_lin_vel": (2, 1.0), "cos_phase": (2, 1.0), "dof_pos": ("joints", 1.0),
    "dof_vel": ("joints", 0.05), "projected_gravity": (3, 1.0), "sin_phase": (2, 1.0),
}  # fmt: skip
"""holosoma's ``loco_g1_29dof`` actor terms: (dim, scale); concatenated in sorted name order."""
HOLOSOMA_ACTION_SCALE, HOLOSOMA_GAIT_PERIOD_S, HOLOSOMA_CLIP = 0.25, 1.0, 100.0

BEYONDMIMIC_TERM_DIMS = {
    "command": ("2joints", 1.0), "motion_anchor_pos_b": (3, 1.0), "motion_anchor_ori_b": (6, 1.0),
    "base_lin_vel": (3, 1.0), "base_ang_vel": (3, 1.0), "joint_pos": ("joints", 1.0),
    "joint_vel": ("joints", 1.0), "actions": ("joints", 1.0),
}  # fmt: skip
"""whole_body_tracking's policy terms (unscaled): dim per name; ``joints`` = the joint count."""
BEYONDMIMIC_KEYS = ("joint_names", "joint_stiffness", "joint_damping", "default_joint_pos", "action_scale",
                    "observation_names", "anchor_body_name", "body_names")  # fmt: skip

ASAP_TERMS = {"actions": 23, "base_ang_vel": 3, "dof_pos": 23, "dof_vel": 23, "projected_gravity": 3,
              "ref_motion_phase": 1}  # fmt: skip
ASAP_SCALES = {"base_ang_vel": 0.25, "dof_vel": 0.05}
ASAP_HISTORY = 4
MOTION_PROBE_MAX_STEPS = 60_000
"""Longest motion probed (20 min at 50 Hz)."""


@dataclass
class Imported:
    """A spec as plain data, with where each top-level value came from."""

    spec: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)


def detect_trainer(actor: ActorFile) -> str:
    """The trainer of a file from its inputs and metadata (``auto``)."""
    meta = actor.metadata
    if "time_step" in actor.input_names and "joint_names" in meta:
        return "beyondmimic"
    if "dof_names" in meta and "kp" in meta:
        return "holosoma"
    if not meta and actor.input_names == ("actor_obs",):
        return "asap"
    raise ConfigError(actor.path, "metadata_props", "cannot tell the trainer: pass --trainer",
                      ", ".join(sorted(meta)) or "no metadata")  # fmt: skip


def _csv(actor: ActorFile, key: str) -> list[str]:
    if key not in actor.metadata:
        raise ConfigError(actor.path, f"metadata_props.{key}", "missing (BeyondMimic's exporter writes it)")
    return [item.strip() for item in actor.metadata[key].split(",")]


def _floats(actor: ActorFile, key: str, items: Sequence[str], tolerance: float | None) -> list[float]:
    values = []
    for position, text in enumerate(items):
        try:
            values.append(float(text))
        except ValueError:
            raise ConfigError(actor.path, f"metadata_props.{key}[{position}]", "not a number", text) from None
        problem = precision_problem(text, tolerance) if tolerance is not None else None
        if problem:
            raise ConfigError(actor.path, f"metadata_props.{key}[{position}]", problem, text)
    return values


def _json(actor: ActorFile, key: str) -> Any:
    if key not in actor.metadata:
        raise ConfigError(actor.path, f"metadata_props.{key}", "missing (holosoma's exporter writes it)")
    try:
        return json.loads(actor.metadata[key])
    except json.JSONDecodeError as exc:
        raise ConfigError(actor.path, f"metadata_props.{key}", f"not JSON: {exc}", actor.metadata[key][:80]) from None


def _per_joint(joints: Sequence[str], values: Sequence[float]) -> dict[str, float]:
    return {j: float(v) for j, v in zip(joints, values)}


def _terms(names: Sequence[str], table: Mapping[str, tuple[Any, float]], joints: int, actor: ActorFile,
           key: str) -> list[dict[str, Any]]:  # fmt: skip
    terms = []
    for name in names:
        if name not in table:
            raise ConfigError(actor.path, key, f"unknown observation term (known: {', '.join(table)})", name)
        dim, scale = table[name]
        width = {"joints": joints, "2joints": 2 * joints}.get(dim, dim) if isinstance(dim, str) else dim
        terms.append({"name": name, "dim": int(width), "scale": scale})
    return terms


def probe_motion_steps(actor: ActorFile) -> int:
    """Frames of the motion in a BeyondMimic model: the first ``time_step`` t whose ``joint_pos``
    equals that of t - 1 and of a step far past any motion (the model holds its last frame)."""
    far = actor.reference(MOTION_PROBE_MAX_STEPS * 10)[0]
    previous = actor.reference(0)[0]
    for step in range(1, MOTION_PROBE_MAX_STEPS):
        current = actor.reference(step)[0]
        if np.array_equal(current, previous) and np.array_equal(current, far):
            return step
        previous = current
    raise ConfigError(actor.path, "time_step", f"the motion still moves after {MOTION_PROBE_MAX_STEPS} steps",
                      MOTION_PROBE_MAX_STEPS)  # fmt: skip


def _beyondmimic(actor: ActorFile, tolerance: float) -> Imported:
    for key in BEYONDMIMIC_KEYS:
        _csv(actor, key)
    joints = _csv(actor, "joint_names")
    meta = "metadata_props"
    out = Imported({})
    kp = _floats(actor, "joint_stiffness", _csv(actor, "joint_stiffness"), tolerance)
    kd = _floats(actor, "joint_damping", _csv(actor, "joint_damping"), tolerance)
    scale = _floats(actor, "action_scale", _csv(actor, "action_scale"), tolerance)
    default = _floats(actor, "default_joint_pos", _csv(actor, "default_joint_pos"), None)
    for key, values in (("joint_stiffness", kp), ("joint_damping", kd), ("action_scale", scale),
                        ("default_joint_pos", default)):  # fmt: skip
        if len(values) != len(joints):
            raise ConfigError(actor.path, f"{meta}.{key}", f"has {len(values)} values for {len(joints)} joint_names",
                              len(values))  # fmt: skip
    names = _csv(actor, "observation_names")
    terms = _terms(names, BEYONDMIMIC_TERM_DIMS, len(joints), actor, f"{meta}.observation_names")
    body_names = _csv(actor, "body_names")
    anchor = actor.metadata["anchor_body_name"].strip()
    if anchor not in body_names:
        raise ConfigError(actor.path, f"{meta}.anchor_body_name", "not one of body_names", anchor)
    steps = probe_motion_steps(actor)
    out.spec = {
        "joints": joints, "kp": _per_joint(joints, kp), "kd": _per_joint(joints, kd),
        "default_q": _per_joint(joints, default),
        "action": {"scale": _per_joint(joints, scale), "clip": None},
        "observation": {"order": "listed", "terms": terms},
        "motion": {"steps": steps, "anchor_body": anchor, "anchor_index": body_names.index(anchor)},
    }  # fmt: skip
    out.sources = {
        "joints": f"{meta}.joint_names (IsaacLab order)", "kp": f"{meta}.joint_stiffness",
        "kd": f"{meta}.joint_damping", "default_q": f"{meta}.default_joint_pos",
        "action.scale": f"{meta}.action_scale", "action.clip": "BeyondMimic does not clip actions",
        "observation": f"{meta}.observation_names (in that order; dims from whole_body_tracking's terms)",
        "motion.steps": f"probed: time_step {steps} repeats the last frame",
        "motion.anchor_body": f"{meta}.anchor_body_name",
        "control_dt": "BeyondMimic's 50 Hz (not in the file)",
    }  # fmt: skip
    return out


def _holosoma(actor: ActorFile) -> Imported:
    joints = [str(j) for j in _json(actor, "dof_names")]
    kp, kd = _json(actor, "kp"), _json(actor, "kd")
    ranges = _json(actor, "command_ranges")
    commands = {}
    for name in ("lin_vel_x", "lin_vel_y", "ang_vel_yaw"):
        if name not in ranges:
            raise ConfigError(actor.path, f"metadata_props.command_ranges.{name}", "missing", sorted(ranges))
        low, high = (float(v) for v in ranges[name])
        commands[name] = [low, high]
    if len(joints) != len(HOLOSOMA_DEFAULT_Q):
        raise ConfigError(actor.path, "metadata_props.dof_names",
                          f"holosoma's G1 default pose has {len(HOLOSOMA_DEFAULT_Q)} joints", len(joints))  # fmt: skip
    meta = "metadata_props"
    out = Imported({})
    out.spec = {
        "joints": joints, "kp": _per_joint(joints, kp), "kd": _per_joint(joints, kd),
        "default_q": _per_joint(joints, HOLOSOMA_DEFAULT_Q),
        "action": {"scale": HOLOSOMA_ACTION_SCALE, "clip": HOLOSOMA_CLIP},
        "observation": {"order": "alphabetical",
                        "terms": _terms(sorted(HOLOSOMA_TERMS), HOLOSOMA_TERMS, len(joints), actor, "observation")},
        "commands": commands, "gait": {"period_s": HOLOSOMA_GAIT_PERIOD_S},
    }  # fmt: skip
    out.sources = {
        "joints": f"{meta}.dof_names (SDK motor order)", "kp": f"{meta}.kp", "kd": f"{meta}.kd",
        "default_q": f"{HOLOSOMA_DEFAULTS} (default_dof_angles; not in the file)",
        "action": f"{HOLOSOMA_DEFAULTS} (policy_action_scale 0.25, clip +-100)",
        "observation": f"{HOLOSOMA_DEFAULTS} (loco_g1_29dof terms, sorted by name)",
        "commands": f"{meta}.command_ranges", "gait.period_s": f"{HOLOSOMA_DEFAULTS} (gait_period)",
        "control_dt": f"{HOLOSOMA_DEFAULTS} (rl_rate 50)",
    }  # fmt: skip
    return out


def _asap(actor: ActorFile, robot: RobotModel, motion_length_s: float | None) -> Imported:
    joints = list(robot.groups["asap_driven"])
    terms = [{"name": n, "dim": d, "scale": ASAP_SCALES.get(n, 1.0)} for n, d in sorted(ASAP_TERMS.items())]
    out = Imported({})
    out.spec = {
        "joints": joints, "kp": _per_joint(joints, robot.kp[robot.indices(joints)]),
        "kd": _per_joint(joints, robot.kd[robot.indices(joints)]),
        "default_q": _per_joint(joints, robot.default_q[robot.indices(joints)]),
        "action": {"scale": 0.25, "clip": 100.0},
        "observation": {"order": "alphabetical", "terms": terms,
                        "history": {"name": "history_actor", "length": ASAP_HISTORY, "order": "newest_first"}},
    }  # fmt: skip
    if motion_length_s is not None:
        out.spec["motion"] = {"length_s": motion_length_s}
    out.sources = {
        "joints": "ASAP's 23 driven joints (robot group asap_driven)", "kp": "robot model (config/g1_29dof.yaml)",
        "kd": "robot model (config/g1_29dof.yaml)", "default_q": "robot model (config/g1_29dof.yaml)",
        "action": "ASAP's deploy defaults (scale 0.25, clip +-100)",
        "observation": "ASAP's mimic layout (alphabetical terms + 4-step history, newest first)",
        "control_dt": "ASAP's 50 Hz",
    }  # fmt: skip
    if motion_length_s is not None:
        out.sources["motion.length_s"] = "--motion-length"
    return out


def apply_gains_file(imported: Imported, path: Path, robot: RobotModel) -> None:
    """``--gains FILE``: YAML ``kp``, ``kd``, ``default_q`` mappings (joint: value) that replace the
    imported values of the joints they name."""
    cfg = load_config(path)
    cfg.reject_unknown({"kp", "kd", "default_q"})
    for key in ("kp", "kd", "default_q"):
        values = cfg.joint_values(key, robot.joint_names, {})
        if values:
            imported.spec[key].update({j: float(v) for j, v in values.items()})
            imported.sources[key] = f"{path} ({len(values)} joints), else {imported.sources[key]}"


def import_actor(
    model: Path, robot: RobotModel, trainer: str = "auto", gains: Path | None = None,
    motion_length_s: float | None = None, tolerance: float = PRECISION_TOLERANCE, name: str | None = None,
) -> Imported:  # fmt: skip
    """The spec of ``model`` as data; refuses, naming the file, key and value, whatever the robot
    could not arm (see :func:`check_imported`)."""
    actor = open_actor_file(model)
    if trainer == "auto":
        trainer = detect_trainer(actor)
    if trainer == "beyondmimic":
        imported = _beyondmimic(actor, tolerance)
    elif trainer == "holosoma":
        imported = _holosoma(actor)
    elif trainer == "asap":
        imported = _asap(actor, robot, motion_length_s)
    else:
        raise ConfigError(model, "--trainer", f"unknown trainer (known: auto, {', '.join(TRAINERS)})", trainer)
    if gains is not None:
        apply_gains_file(imported, gains, robot)
    output = "actions" if trainer == "beyondmimic" else actor.output_names[0]
    imported.spec = {
        "name": name or model.stem, "trainer": trainer,
        "actor": {"file": str(model.resolve()), "sha256": actor.sha256,
                  "external_data": [{"file": str(p), "sha256": s} for p, s in actor.external_data],
                  "inputs": [{"name": n, "dim": actor.input_dims[n]} for n in actor.input_names],
                  "output": output},
        **imported.spec, "control_dt": 0.02,
    }  # fmt: skip
    imported.sources["actor"] = f"{model} (inputs, outputs and SHA-256 read from the file)"
    check_imported(imported.spec, robot, model, actor.output_dims[output])
    return imported


def check_imported(spec: Mapping[str, Any], robot: RobotModel, source: Path | str, action_dim: int) -> None:
    """The contract's checks on a spec as data: joints bound by name (none unknown, none twice,
    all 29 for a whole-body actor), gains > 0 and within the motors' bounds, the default pose in
    range, the terms adding up to the observation width, one action per joint."""
    joints = list(spec["joints"])
    bind_joints(joints, robot, source, "joints")
    if spec["trainer"] != "asap":
        require_all_motors(joints, robot, source, "joints")
    for key in ("kp", "kd", "default_q"):
        values = spec[key]
        unknown = [j for j in values if j not in robot.joint_names]
        if unknown:
            raise ConfigError(source, f"{key}.{unknown[0]}", "not a joint of the robot model", unknown[0])
        absent = [j for j in joints if j not in values]
        if absent:
            raise ConfigError(source, key, "no value for actor joint", absent[0])
        check_per_joint([values[j] for j in values], list(values), robot, source, key)
    scale = spec["action"]["scale"]
    if isinstance(scale, Mapping):
        for joint in joints:
            if not 0.0 < float(scale.get(joint, 0.0)) <= 1.0:
                raise ConfigError(source, f"action.scale.{joint}", "must be in (0, 1] rad per unit", scale.get(joint))
    obs = spec["observation"]
    blocks = [ObsTerm(t["name"], int(t["dim"]), float(t["scale"])) for t in obs["terms"]]
    if "history" in obs:
        blocks.append(ObsTerm(obs["history"]["name"], obs["history"]["length"] * sum(b.dim for b in blocks), 1.0))
    check_obs_dims(blocks, int(spec["actor"]["inputs"][0]["dim"]), source, "observation.terms")
    if action_dim != len(joints):
        raise ConfigError(source, "joints", f"lists {len(joints)} joints but the model's action has {action_dim}",
                          action_dim)  # fmt: skip


def write_spec(imported: Imported, out: Path) -> None:
    """Write the spec (with its ``sources``) as YAML; ``check-policy`` and the loaders take it."""
    import yaml

    data = {**imported.spec, "sources": dict(sorted(imported.sources.items()))}
    header = (f"# Policy spec written by asap-ros policy import from {imported.spec['actor']['file']}\n"
              "# (trainer {trainer}); `sources` says where each value came from.\n").format(**imported.spec)
    out.write_text(header + yaml.safe_dump(data, sort_keys=False, width=120))
