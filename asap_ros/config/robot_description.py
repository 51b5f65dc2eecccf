"""The G1's robot description (URDF) for viewers: ASAP's URDF as the runtime drives the robot.

ASAP's ``robots/g1/g1_29dof_anneal_23dof.urdf`` is the model its actors were trained on: the
six wrist joints are ``fixed`` there (the actors drive 23 joints; the runtime holds the wrists).
The description here is that file with every one of the robot's 29 motor joints ``revolute``
(the wrist joints already carry their axis and limits in the file) and every mesh as an
absolute ``file://`` URI of the asset folder, so a viewer that gets the text alone (Foxglove
from a ``/robot_description`` topic) finds the meshes on this machine.

:class:`RobotDescription` also poses the model: the transform of each joint (parent link to
child link) for given joint angles, as viewers and TF need them.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import numpy as np

from asap_ros.config.assets import asset_path
from asap_ros.core.errors import ConfigError

URDF_ASSET = "robots/g1/g1_29dof_anneal_23dof.urdf"
MOVING_TYPES = ("revolute", "continuous")
STANDING_PELVIS_HEIGHT_M = 0.78
"""The root (pelvis) height shown when no motion capture gives the root position."""
ROOT_FROM_MOCAP = "mocap"
ROOT_FROM_IMU = "IMU orientation (no fresh mocap)"


@dataclass(frozen=True)
class Joint:
    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray
    """(4, 4) parent link frame -> joint frame at zero angle."""
    axis: np.ndarray
    """(3,) unit rotation axis in the joint frame."""


@dataclass(frozen=True)
class Visual:
    link: str
    mesh: Path
    origin: np.ndarray
    """(4, 4) link frame -> mesh frame."""
    rgba: tuple[float, float, float, float]


def rpy_matrix(rpy: Sequence[float]) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes x, y, z) as a 3x3 rotation."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])  # fmt: skip


def axis_angle_matrix(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation by ``angle`` about the unit ``axis`` (Rodrigues)."""
    x, y, z = axis
    k = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


def root_pose(
    mocap: tuple[Sequence[float], Sequence[float]] | None, imu_quat_wxyz: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, str]:
    """``(position, quaternion wxyz, source)`` of the root: the mocap pose ``(position, wxyz)``
    if there is a fresh one, else the IMU orientation at :data:`STANDING_PELVIS_HEIGHT_M`."""
    if mocap is not None:
        return np.asarray(mocap[0], dtype=np.float64), np.asarray(mocap[1], dtype=np.float64), ROOT_FROM_MOCAP
    position = np.array([0.0, 0.0, STANDING_PELVIS_HEIGHT_M])
    return position, np.asarray(imu_quat_wxyz, dtype=np.float64), ROOT_FROM_IMU


def _origin(element: ET.Element | None) -> np.ndarray:
    transform = np.eye(4)
    if element is not None:
        transform[:3, :3] = rpy_matrix([float(v) for v in element.get("rpy", "0 0 0").split()])
        transform[:3, 3] = [float(v) for v in element.get("xyz", "0 0 0").split()]
    return transform


class RobotDescription:
    """The URDF text for viewers plus its kinematic tree (see the module docstring)."""

    def __init__(self, urdf_file: str | os.PathLike, motor_joints: Sequence[str]):
        self.source = Path(urdf_file)
        try:
            root = ET.parse(self.source).getroot()
        except (OSError, ET.ParseError) as exc:
            raise ConfigError(self.source, None, f"not a readable URDF: {exc}") from exc
        joints = {j.get("name"): j for j in root.iter("joint")}
        missing = [name for name in motor_joints if name not in joints]
        if missing:
            raise ConfigError(self.source, "joint", "motor joints missing from the URDF", missing)
        for name in motor_joints:
            element = joints[name]
            if element.find("axis") is None or element.find("limit") is None:
                raise ConfigError(self.source, f"joint {name}", "a motor joint needs <axis> and <limit>")
            element.set("type", "revolute")
        for mesh in root.iter("mesh"):
            mesh.set("filename", (self.source.parent / mesh.get("filename", "")).resolve().as_uri())
        self.name = root.get("name", "")
        self.xml = ET.tostring(root, encoding="unicode")
        """The description as text (``/robot_description``)."""
        self.motor_joints = tuple(motor_joints)
        self.joints = tuple(self._joint(j) for j in root.iter("joint"))
        self.visuals = tuple(self._visuals(root))
        children = {j.child for j in self.joints}
        roots = [link.get("name") for link in root.iter("link") if link.get("name") not in children]
        if len(roots) != 1:
            raise ConfigError(self.source, "link", "expected exactly one root link", roots)
        self.root_link: str = roots[0]

    def _joint(self, element: ET.Element) -> Joint:
        axis_element = element.find("axis")
        axis = np.array([float(v) for v in axis_element.get("xyz", "1 0 0").split()]) if axis_element is not None else np.array([1.0, 0.0, 0.0])
        return Joint(
            name=element.get("name", ""),
            type=element.get("type", ""),
            parent=element.find("parent").get("link"),
            child=element.find("child").get("link"),
            origin=_origin(element.find("origin")),
            axis=axis / np.linalg.norm(axis),
        )

    def _visuals(self, root: ET.Element):
        for link in root.iter("link"):
            for visual in link.iter("visual"):
                mesh = visual.find("geometry/mesh")
                if mesh is None:
                    continue
                color = visual.find("material/color")
                rgba = tuple(float(v) for v in color.get("rgba").split()) if color is not None else (0.7, 0.7, 0.7, 1.0)
                mesh_file = Path(url2pathname(urlparse(mesh.get("filename", "")).path))
                yield Visual(link.get("name"), mesh_file, _origin(visual.find("origin")), rgba)

    def joint_transforms(self, angles: Mapping[str, float]) -> dict[str, np.ndarray]:
        """Child link -> (4, 4) parent link -> child link, for every joint; a moving joint
        missing from ``angles`` is at 0."""
        transforms = {}
        for joint in self.joints:
            transform = joint.origin
            if joint.type in MOVING_TYPES:
                rotation = np.eye(4)
                rotation[:3, :3] = axis_angle_matrix(joint.axis, float(angles.get(joint.name, 0.0)))
                transform = joint.origin @ rotation
            transforms[joint.child] = transform
        return transforms

    def link_poses(self, angles: Mapping[str, float], root_pose: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Link -> (4, 4) world pose, the root link at ``root_pose`` (default identity)."""
        local = self.joint_transforms(angles)
        parents = {j.child: j.parent for j in self.joints}
        poses = {self.root_link: np.eye(4) if root_pose is None else root_pose}

        def pose(link: str) -> np.ndarray:
            if link not in poses:
                poses[link] = pose(parents[link]) @ local[link]
            return poses[link]

        for link in parents:
            pose(link)
        return poses


def load_robot_description(
    motor_joints: Sequence[str] | None = None, assets_dir: str | os.PathLike | None = None
) -> RobotDescription:
    """ASAP's G1 URDF from the asset folder, prepared for viewers (motor joints default:
    the package robot model's 29)."""
    if motor_joints is None:
        from asap_ros.config.robot import load_robot_model

        motor_joints = load_robot_model().joint_names
    return RobotDescription(asset_path(URDF_ASSET, assets_dir), motor_joints)
