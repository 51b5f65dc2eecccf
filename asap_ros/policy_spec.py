"""Policy specs (``policies/<name>.yaml``): everything needed to run one ONNX actor.

A spec names the actor file and its SHA-256, the ONNX input/output, the driven joints, the
observation layout (terms with dim and scale, concatenated in alphabetical order of their
names, plus one history block), the action scale and clip, gains and default pose overrides,
the phase clock and the PREPARE pose. A different observation layout is a new spec, not new code.

Two kinds of actor share this format:

- a motion-tracking actor names a clip (``phase.clip``) and a ``prepare`` pose: its phase runs
  from 0 to 1 over the clip and the motion is over when it reaches 1;
- a standing actor (ASAP's decoupled locomotion actor with zero velocity commands) names no
  clip: it runs until it is switched off. Its observation may hold the constant ``commands``
  and the ``reference`` pose of the joints it does not drive (the upper body), which those
  joints hold; ``observed_joints`` lets its dof_pos/dof_vel terms cover all motors.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.assets import asset_root
from asap_ros.clip import load_clip
from asap_ros.robot import RobotModel, load_robot_model
from asap_ros.yaml_config import ConfigReader, load_config


@dataclass(frozen=True)
class ObsTerm:
    """One observation term: ``scale`` times its raw value, ``dim`` floats."""

    name: str
    dim: int
    scale: float


@dataclass(frozen=True)
class HistorySpec:
    """The history block: ``length`` past steps of each term in ``terms`` (alphabetical)."""

    name: str
    length: int
    terms: tuple[str, ...]
    newest_first: bool


@dataclass(frozen=True)
class ObsSlice:
    """Where one block sits in the observation vector."""

    name: str
    offset: int
    dim: int


@dataclass(frozen=True)
class StandingCommands:
    """The constant commands a standing actor observes (ASAP's locomotion commands, unscaled).

    ``stand`` is ASAP's ``command_stand``: 0 is stance, where ASAP's gait phase stays at 0
    (``phase_time = (t * stand) % period / period``), so ``sin_phase`` is 0 and ``cos_phase`` 1.
    """

    lin_vel: tuple[float, float]
    ang_vel: float
    stand: float
    base_height: float

    @property
    def gait_phase(self) -> float:
        """ASAP's ``phase_time`` in [0, 1): 0 in stance."""
        return 0.0


@dataclass(frozen=True)
class PolicySpec:
    """A validated policy spec; arrays are in G1 motor order unless named ``driven``."""

    name: str
    source: Path
    """The spec file (named in every error)."""
    actor_path: Path
    actor_sha256: str
    input_name: str
    input_dim: int
    output_name: str
    output_dim: int
    driven_joints: tuple[str, ...]
    driven_indices: np.ndarray
    observed_joints: tuple[str, ...]
    """Joints of the dof_pos/dof_vel terms, in their order (the driven joints unless set)."""
    observed_indices: np.ndarray
    reference_joints: tuple[str, ...]
    """Joints of the ``ref_upper_dof_pos`` term (empty unless the spec has a ``reference``)."""
    reference_indices: np.ndarray
    snap_indices: np.ndarray
    """Reference joints whose target jumps to the reference pose when the actor takes over
    instead of blending (motor indices; ASAP zeroes waist roll and pitch on that switch)."""
    commands: StandingCommands | None
    terms: tuple[ObsTerm, ...]
    """Current-step terms, sorted by name."""
    history: HistorySpec | None
    action_scale: float
    action_clip: float
    default_q: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    control_dt: float
    phase_start: float
    clip_path: Path | None
    """The tracked clip; ``None`` for a standing actor."""
    clip_duration_s: float
    """``(N - 1) / fps`` of the tracked clip: the phase reaches 1 after this time (a standing
    actor: infinite, its phase stays 0 and it is never done)."""
    prepare_pose: np.ndarray
    """[29] pose PREPARE blends to; non-driven joints hold it while the actor runs (a standing
    actor: the default pose with its ``reference`` pose)."""
    prepare_blend_s: float
    prepare_hold_s: float

    @property
    def is_motion(self) -> bool:
        """A motion-tracking actor (it has a clip), not a standing one."""
        return self.clip_path is not None

    @property
    def layout(self) -> tuple[ObsSlice, ...]:
        """Every block of the observation (terms and history) in order, with offsets."""
        blocks = [(t.name, t.dim) for t in self.terms]
        if self.history is not None:
            blocks.append((self.history.name, self.history_dim))
        slices, offset = [], 0
        for name, dim in sorted(blocks):
            slices.append(ObsSlice(name, offset, dim))
            offset += dim
        return tuple(slices)

    @property
    def history_dim(self) -> int:
        if self.history is None:
            return 0
        return self.history.length * sum(self.term(n).dim for n in self.history.terms)

    def term(self, name: str) -> ObsTerm:
        return next(t for t in self.terms if t.name == name)


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

    Asset paths in the spec are relative to :func:`asap_ros.assets.asset_root`.
    """
    path = Path(path)
    robot = robot or load_robot_model()
    cfg = load_config(path)
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
        action_scale=spec_action.float("scale", low=0.0),
        action_clip=spec_action.float("clip", low=0.0),
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
