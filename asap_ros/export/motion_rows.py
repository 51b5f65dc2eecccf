"""Recorded motions as the delta trainer reads them: rows of the motion file with ``action``.

A recording is a session bag (each episode goes through the ``--format asap`` export in memory)
or such an export (``.pkl``, ``{name: {...}}``, several names allowed). Row i holds the state
after actor step i and the raw action i that led there (``docs/export.md``); ASAP's trainer
applies row n + 1's action to row n's state. The trainer reads ``root_trans_offset``,
``pose_aa`` (root rotation and joint angles), ``fps`` and ``action``; the recorded velocities
(``root_lin_vel``, ``root_ang_vel`` world frame, ``dof_vel``) and the IMU's ``gyro`` (pelvis
frame) are read when present.

``action`` must hold the actor's raw output (``0.25·a + default`` is the target). An export
made with ``--action executed`` (its ``.meta.json`` says so) is refused, and so is a file whose
actions track the next state better read as targets (``a``) or as scaled offsets
(``a + default``) than as raw actions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from asap_ros.config.clip import load_pickle_restricted
from asap_ros.core.errors import ConfigError
from asap_ros.core.quaternion import quat_from_rotvec
from asap_ros.export.asap_clip import SUFFIX as PICKLE_SUFFIX
from asap_ros.export.asap_clip import clip_fields
from asap_ros.export.bag import SessionBag
from asap_ros.export.exporter import META_SUFFIX, aligned_episodes, export_stem
from asap_ros.export.formats import EXECUTED, RAW, ExportContext, load_context
from asap_ros.export.trainer_sim import ACTION_SCALE
from asap_ros.recording import topics
from asap_ros.tracking.kinematics import NUM_DRIVEN

TRAINER_KEYS = ("root_trans_offset", "pose_aa", "fps", "action")
"""What ASAP's delta trainer reads of a motion (``motion_lib_base.py``, ``load_motion_with_skeleton``)."""
VELOCITY_KEYS = ("root_lin_vel", "root_ang_vel", "dof_vel", "gyro")
RAW_MARGIN = 0.8
"""Actions are taken for targets or scaled offsets only when that reading tracks the next state
better than this fraction of the raw reading's median error (raw actions lead the state: a PD
target is never reached within a step, so the raw reading's error is never near zero)."""
_EXPORT_STEM = re.compile(r"_ep\d{3}_(?P<motion>.+)$")


@dataclass(frozen=True)
class MotionRows:
    """One recorded motion, row i = the state after action i, and action i (float64 except ``action``)."""

    name: str
    motion: str
    """The motion (actor) it ran, for holding motions out."""
    source: str
    fps: float
    root_pos: np.ndarray
    """(T, 3) pelvis position, m."""
    root_quat_wxyz: np.ndarray
    """(T, 4) from ``pose_aa``'s root rotation vector, as the trainer reads it."""
    dof: np.ndarray
    """(T, 23) joint angles, ASAP's driven joints."""
    action: np.ndarray
    """(T, 23) float32 raw actor output."""
    root_lin_vel_world: np.ndarray | None = None
    root_ang_vel_world: np.ndarray | None = None
    dof_vel: np.ndarray | None = None
    gyro: np.ndarray | None = None
    """(T, 3) the IMU's angular velocity, pelvis frame, rad/s (what ``--reset-velocity measured`` resets to)."""

    def __len__(self) -> int:
        return len(self.dof)

    @property
    def dt(self) -> float:
        return 1.0 / self.fps

    @property
    def has_velocities(self) -> bool:
        return self.root_lin_vel_world is not None and self.root_ang_vel_world is not None and self.dof_vel is not None


def rows_from_fields(fields: dict, name: str, motion: str, source: str, axes: np.ndarray) -> MotionRows:
    """Checked :class:`MotionRows` of one ``{key: array}`` motion entry (errors name ``source`` and the key)."""
    for key in TRAINER_KEYS:
        if key not in fields:
            problem = "missing: the delta trainer's motion file needs root_trans_offset, pose_aa, fps and action"
            raise ConfigError(source, f"{name}.{key}", problem)
    fps = fields["fps"]
    if isinstance(fps, bool) or not isinstance(fps, (int, float, np.number)) or not float(fps) > 0:
        raise ConfigError(source, f"{name}.fps", "must be a positive number", fps)
    pose = _array(source, name, "pose_aa", fields, (None, 1 + NUM_DRIVEN + 3, 3))
    frames = len(pose)
    root_pos = _array(source, name, "root_trans_offset", fields, (frames, 3))
    action = _array(source, name, "action", fields, (frames, NUM_DRIVEN)).astype(np.float32)
    if frames < 2:
        raise ConfigError(source, f"{name}.pose_aa", "a motion needs at least 2 rows", frames)
    velocities = {key: _array(source, name, key, fields, (frames, NUM_DRIVEN if key == "dof_vel" else 3))
                  for key in VELOCITY_KEYS if key in fields}  # fmt: skip
    return MotionRows(
        name=name, motion=motion, source=source, fps=float(fps), root_pos=root_pos,
        root_quat_wxyz=quat_from_rotvec(pose[:, 0]),
        dof=np.einsum("tjk,jk->tj", pose[:, 1 : 1 + NUM_DRIVEN], axes),
        action=action,
        root_lin_vel_world=velocities.get("root_lin_vel"),
        root_ang_vel_world=velocities.get("root_ang_vel"),
        dof_vel=velocities.get("dof_vel"),
        gyro=velocities.get("gyro"),
    )  # fmt: skip


def _array(source: str, name: str, key: str, fields: dict, shape: tuple[int | None, ...]) -> np.ndarray:
    try:
        array = np.asarray(fields[key], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ConfigError(source, f"{name}.{key}", f"not a numeric array: {exc}") from exc
    if array.ndim != len(shape) or any(want is not None and got != want for got, want in zip(array.shape, shape)):
        wanted = "(" + ", ".join("T" if n is None else str(n) for n in shape) + ")"
        raise ConfigError(source, f"{name}.{key}", f"must have shape {wanted}", array.shape)
    if not np.all(np.isfinite(array)):
        row = int(np.argwhere(~np.isfinite(array))[0, 0])
        raise ConfigError(source, f"{name}.{key}", "non-finite values", f"first at row {row}")
    return array


def motion_of_stem(stem: str) -> str:
    """The motion of an ``asap-ros export`` file name ``<bag>_ep<NNN>_<motion>`` (else the name itself)."""
    match = _EXPORT_STEM.search(stem)
    return match.group("motion") if match else stem


def load_pickle_rows(path: str | Path, axes: np.ndarray, default_q: np.ndarray, scale: float) -> list[MotionRows]:
    """Every motion of a trainer motion pickle, its actions checked to be raw."""
    path = Path(path)
    meta = path.with_name(path.name[: -len(PICKLE_SUFFIX)] + META_SUFFIX) if path.name.endswith(PICKLE_SUFFIX) else None
    recorded_motion = None
    if meta is not None and meta.is_file():
        info = json.loads(meta.read_text(encoding="utf-8"))
        if info.get("action", RAW) == EXECUTED:
            problem = ("the action key holds the executed (joint-limit clamped) targets, not the raw actor output "
                       "ASAP's trainer replays; export again with --action raw")  # fmt: skip
            raise ConfigError(meta, "action", problem, EXECUTED)
        recorded_motion = info.get("motion")
    data = load_pickle_restricted(path)
    if not isinstance(data, dict) or not data or not all(isinstance(v, dict) for v in data.values()):
        raise ConfigError(path, None, "expected a non-empty {motion_name: {key: array}} mapping", type(data).__name__)
    rows = [rows_from_fields(fields, str(name), recorded_motion or motion_of_stem(str(name)), str(path), axes)
            for name, fields in data.items()]  # fmt: skip
    for motion in rows:
        check_raw_actions(motion, default_q, scale)
    return rows


def check_raw_actions(rows: MotionRows, default_q: np.ndarray, scale: float) -> None:
    """Refuse actions that read better as joint targets or scaled offsets than as raw output.

    Action i led to the state of row i: its target ``scale·a + default`` is where the joints were
    heading. A file of targets (``a`` in rad) or of ``scale·a`` (``a + default``) tracks the
    next state far better read that way.
    """
    following = rows.dof
    readings = {
        "raw actor output (target = 0.25·a + default)": rows.action * scale + default_q,
        "joint position targets (target = a)": rows.action.astype(np.float64),
        "scaled actions (target = a + default)": rows.action + default_q,
    }
    errors = {what: float(np.median(np.abs(target - following))) for what, target in readings.items()}
    raw_error = next(iter(errors.values()))
    best = min(errors, key=errors.__getitem__)
    if best != next(iter(errors)) and errors[best] < RAW_MARGIN * raw_error:
        problem = (f"the action key does not hold raw actor output: it reads as {best} (median joint error "
                   f"{errors[best]:.3f} rad against the next state, {raw_error:.3f} rad read as raw); ASAP's "
                   "trainer applies 0.25·action + default")  # fmt: skip
        raise ConfigError(rows.source, f"{rows.name}.action", problem)


def load_bag_rows(bag_path: str | Path, ctx: ExportContext, episodes: Sequence[int] | None = None,
                  mocap_topic: str = topics.MOCAP_POSE, mocap_filter_ms: float = 0.0) -> list[MotionRows]:  # fmt: skip
    """Every episode of a bag as the ``--format asap`` export would write it (raw actions; mocap needed)."""
    ctx = replace(ctx, action=RAW)
    found = []
    with SessionBag(bag_path, mocap_topic) as bag:
        for episode, aligned, episode_ctx, _clip in aligned_episodes(bag, ctx, episodes, None, mocap_filter_ms):
            fields = clip_fields(aligned, episode_ctx)
            found.append(rows_from_fields(fields, export_stem(bag.path.name, episode.name), episode.motion,
                                          str(bag.path), ctx.joint_axes))  # fmt: skip
    return found


def load_recordings(paths: Sequence[str | Path], episodes: Sequence[int] | None = None,
                    mocap_topic: str = topics.MOCAP_POSE, mocap_filter_ms: float = 0.0,
                    ctx: ExportContext | None = None) -> list[MotionRows]:  # fmt: skip
    """Bags (directories or their ``.mcap``) and ``--format asap`` pickles, in the order given."""
    ctx = ctx or load_context()
    default_q, scale = ctx.robot.default_q[ctx.driven_motors], ACTION_SCALE
    found: list[MotionRows] = []
    for path in map(Path, paths):
        if not path.exists():
            raise ConfigError(path, None, "no such recording (a bag directory or an asap-ros export .pkl)")
        if path.suffix == PICKLE_SUFFIX:
            found += load_pickle_rows(path, ctx.joint_axes, default_q, scale)
        else:
            found += load_bag_rows(path, ctx, episodes, mocap_topic, mocap_filter_ms)
    return found
