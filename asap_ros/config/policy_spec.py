"""Loads and validates policy specs (``policies/<name>.yaml``) into
:class:`~asap_ros.core.policy_spec.PolicySpec`; see there for what a spec holds."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from asap_ros.config.assets import asset_root
from asap_ros.config.clip import load_clip
from asap_ros.config.paths import policies_dir
from asap_ros.config.reader import ConfigReader, load_config
from asap_ros.config.robot import load_robot_model
from asap_ros.core.errors import ConfigError
from asap_ros.core.policy_spec import HistorySpec, ObsSlice, ObsTerm, PolicySpec, StandingCommands
from asap_ros.core.robot import RobotModel, gain_problem

MAX_ACTION_SCALE = 1.0
"""rad per unit of actor output: ASAP's actors use 0.25, so a raw output of 4 moves a target 1 rad."""
MAX_ACTION_CLIP = 100.0
"""ASAP clips raw actor outputs to +-100 (``clip_actions``); a larger clip lets a wild output further."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


_TOP_KEYS = {
    "name", "actor", "driven_joints", "observed_joints", "observation", "action", "default_q", "gains",
    "commands", "reference", "phase", "prepare",
}  # fmt: skip


def load_policy_spec(
    path: str | Path, robot: RobotModel | None = None, assets_dir: str | Path | None = None
) -> PolicySpec:
    """Load and validate a spec: files exist, SHA-256 matches, dimensions add up, joints known.

    Asset paths in the spec are relative to :func:`asap_ros.config.assets.asset_root`.
    """
    path = Path(path)
    robot = robot or load_robot_model()
    cfg = load_config(path)
    if cfg.has("trainer"):
        problem = ("is a trainer actor's spec (asap-ros policy import): check-policy and asap-ros rollout run it; "
                   "the deploy and sim nodes do not yet")
        raise cfg.error("trainer", problem, cfg.raw("trainer"))
    cfg.reject_unknown(_TOP_KEYS)
    root = asset_root(assets_dir)

    actor = cfg.section("actor")
    actor.reject_unknown({"file", "sha256", "input", "output"})
    actor_path = actor.path("file", root)
    expected_sha = actor.str("sha256").lower()
    actual_sha = sha256_of(actor_path)
    if actual_sha != expected_sha:
        raise actor.error("sha256", f"does not match {actor_path} (file has {actual_sha})", expected_sha)
    onnx_in, onnx_out = actor.section("input"), actor.section("output")
    for io_cfg in (onnx_in, onnx_out):
        io_cfg.reject_unknown({"name", "dim"})

    driven = _joint_list(cfg, "driven_joints", robot)
    observed = _joint_list(cfg, "observed_joints", robot) if cfg.has("observed_joints") else driven
    terms, history = _observation(cfg.section("observation"))
    spec_action = cfg.section("action")
    spec_action.reject_unknown({"scale", "clip"})

    default_q = robot.default_q.copy()
    for joint, value in cfg.joint_values("default_q", robot.joint_names, {}).items():
        default_q[robot.index(joint)] = value
    gains = cfg.section("gains", {})
    gains.reject_unknown({"kp", "kd"})
    kp, kd = robot.kp.copy(), robot.kd.copy()
    for target, key in ((kp, "kp"), (kd, "kd")):
        for joint, value in gains.joint_values(key, robot.joint_names, {}, low=0.0).items():
            problem = gain_problem(key, value, float(robot.tau_limit[robot.index(joint)]))
            if problem:
                raise gains.error(f"{key}.{joint}", problem, value)
            target[robot.index(joint)] = value

    phase = cfg.section("phase")
    phase.reject_unknown({"control_dt", "start", "clip"})
    control_dt = phase.float("control_dt", low=1e-4, high=1.0)
    clip_path = phase.path("clip", root) if phase.has("clip") else None
    prepare_pose = default_q.copy()
    reference_joints: tuple[str, ...] = ()
    snap_joints: tuple[str, ...] = ()
    if cfg.has("reference"):
        reference = cfg.section("reference")
        reference.reject_unknown({"pose_joints", "pose", "snap_joints"})
        reference_joints, reference_pose = _pose(reference, robot)
        prepare_pose[robot.indices(reference_joints)] = reference_pose
        snap_joints = reference.strs("snap_joints", [])
        for joint in snap_joints:
            if joint not in reference_joints:
                raise reference.error("snap_joints", "not one of the reference pose_joints", joint)
    if clip_path is None:
        for section, key in ((cfg, "prepare"), (phase, "start")):
            if section.has(key):
                raise section.error(key, "only a motion-tracking actor (with phase.clip) has this", section.raw(key))
        blend_s = hold_s = 0.0
    else:
        prepare = cfg.section("prepare")
        prepare.reject_unknown({"pose_joints", "pose", "blend_s", "hold_s"})
        pose_joints, pose = _pose(prepare, robot)
        prepare_pose[robot.indices(pose_joints)] = pose
        blend_s, hold_s = prepare.float("blend_s"), prepare.float("hold_s", low=0.0)
        if blend_s < control_dt:
            problem = (f"must be at least one control step (phase.control_dt {control_dt:g} s): a shorter "
                       "blend would jump to the start pose at the motion's gains")
            raise prepare.error("blend_s", problem, blend_s)

    spec = PolicySpec(
        name=cfg.str("name"),
        source=path,
        actor_path=actor_path,
        actor_sha256=actual_sha,
        input_name=onnx_in.str("name"),
        input_dim=onnx_in.int("dim", low=1),
        output_name=onnx_out.str("name"),
        output_dim=onnx_out.int("dim", low=1),
        driven_joints=driven,
        driven_indices=robot.indices(driven),
        observed_joints=observed,
        observed_indices=robot.indices(observed),
        reference_joints=reference_joints,
        reference_indices=robot.indices(reference_joints),
        snap_indices=robot.indices(snap_joints),
        commands=_commands(cfg.section("commands")) if cfg.has("commands") else None,
        terms=terms,
        history=history,
        action_scale=spec_action.float("scale", low=1e-6, high=MAX_ACTION_SCALE),
        action_clip=spec_action.float("clip", low=1e-6, high=MAX_ACTION_CLIP),
        default_q=default_q,
        kp=kp,
        kd=kd,
        control_dt=control_dt,
        phase_start=phase.float("start", 0.0, low=0.0),
        clip_path=clip_path,
        clip_duration_s=load_clip(clip_path).duration_s if clip_path is not None else math.inf,
        prepare_pose=np.clip(prepare_pose, robot.q_lower, robot.q_upper),
        prepare_blend_s=blend_s,
        prepare_hold_s=hold_s,
    )
    _check_dimensions(cfg, spec)
    for array in (
        spec.driven_indices, spec.observed_indices, spec.reference_indices, spec.snap_indices,
        spec.default_q, spec.kp, spec.kd, spec.prepare_pose,
    ):  # fmt: skip
        array.setflags(write=False)
    return spec


def _pose(cfg: ConfigReader, robot: RobotModel) -> tuple[tuple[str, ...], np.ndarray]:
    """``(joints, pose)`` of a pose section: ``pose_joints`` (list or group) and ``pose`` (one value each)."""
    joints = _joint_list(cfg, "pose_joints", robot)
    return joints, cfg.floats("pose", length=len(joints))


def _commands(cfg: ConfigReader) -> StandingCommands:
    cfg.reject_unknown({"lin_vel", "ang_vel", "stand", "base_height"})
    lin_vel = cfg.floats("lin_vel", length=2)
    stand = cfg.float("stand")
    if stand != 0.0:
        problem = "must be 0 (stance): ASAP advances its gait phase with time when stand is 1, this runtime does not"
        raise cfg.error("stand", problem, stand)
    return StandingCommands(
        lin_vel=(float(lin_vel[0]), float(lin_vel[1])),
        ang_vel=cfg.float("ang_vel"),
        stand=stand,
        base_height=cfg.float("base_height", low=0.0),
    )


def _joint_list(cfg: ConfigReader, key: str, robot: RobotModel) -> tuple[str, ...]:
    """Joint names given as a list or as the name of a robot joint group."""
    if isinstance(cfg.raw(key), str):
        group = cfg.str(key)
        if group not in robot.groups:
            raise cfg.error(key, f"unknown joint group (known: {', '.join(robot.groups)})", group)
        return robot.groups[group]
    return cfg.joint_names(key, robot.joint_names)


def _observation(obs: ConfigReader) -> tuple[tuple[ObsTerm, ...], HistorySpec | None]:
    obs.reject_unknown({"terms", "history"})
    terms_cfg = obs.section("terms")
    if not terms_cfg.data:
        raise obs.error("terms", "at least one observation term is needed")
    terms = []
    for name in sorted(map(str, terms_cfg.data)):
        term = terms_cfg.section(name)
        term.reject_unknown({"dim", "scale"})
        terms.append(ObsTerm(name, term.int("dim", low=1), term.float("scale")))
    if not obs.has("history"):
        return tuple(terms), None
    hist = obs.section("history")
    hist.reject_unknown({"name", "length", "terms", "order"})
    history_terms = hist.strs("terms")
    for name in history_terms:
        if name not in terms_cfg.data:
            raise hist.error("terms", "history term is not an observation term", name)
    history_name = hist.str("name")
    if history_name in terms_cfg.data:
        raise hist.error("name", "history block name collides with an observation term", history_name)
    history = HistorySpec(
        name=history_name,
        length=hist.int("length", low=1),
        terms=tuple(sorted(history_terms)),
        newest_first=hist.str("order", choices={"newest_first", "oldest_first"}) == "newest_first",
    )
    return tuple(terms), history


def _check_dimensions(cfg: ConfigReader, spec: PolicySpec) -> None:
    total = sum(s.dim for s in spec.layout)
    if total != spec.input_dim:
        raise cfg.error(
            "observation.terms",
            f"term dims sum to {total} ({_describe(spec.layout)}) but actor.input.dim is {spec.input_dim}",
            total,
        )
    if spec.output_dim != len(spec.driven_joints):
        raise cfg.error(
            "actor.output.dim",
            f"is {spec.output_dim} but driven_joints lists {len(spec.driven_joints)} joints",
            spec.output_dim,
        )


def _describe(layout: Sequence[ObsSlice]) -> str:
    return " + ".join(f"{s.name} {s.dim}" for s in layout)


def resolve_policy_files(names: list[str], source: str) -> list[Path]:
    """Spec files by name (relative names are looked up in the package ``policies/``)."""
    paths = []
    for name in names:
        path = Path(name) if Path(name).is_absolute() else policies_dir() / name
        if not path.is_file():
            raise ConfigError(source, "policies", f"policy spec not found at {path}", name)
        paths.append(path)
    return paths
