"""One G1 in the viser scene, built from the robot description: a frame per link, nested as
the kinematic tree, the link's meshes in it. Posing it moves the root frame and turns the
frames of the moving joints; nothing else is sent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from asap_ros.config.robot_description import MOVING_TYPES, RobotDescription
from asap_ros.core.quaternion import matrix_to_quat_wxyz
from asap_ros.view.meshes import Mesh
from asap_ros.view.snapshot import BodyPose

RGB = tuple[float, float, float]
"""Channels 0..1."""


def rgb255(rgb: RGB) -> tuple[int, int, int]:
    """viser's colour of a handle: a colour property set after creation must be 0..255 integers."""
    return tuple(int(round(255 * min(1.0, max(0.0, c)))) for c in rgb)


class RobotFigure:
    """A posable G1 under scene node ``name``; ``color`` replaces the URDF colours (a ghost)."""

    def __init__(
        self,
        scene: Any,
        name: str,
        description: RobotDescription,
        meshes: Sequence[Mesh],
        color: RGB | None = None,
        opacity: float = 1.0,
    ) -> None:
        self._description = description
        self._root = scene.add_frame(name, show_axes=False)
        paths = {description.root_link: name}
        parents = {j.child: j.parent for j in description.joints}

        def path(link: str) -> str:
            if link not in paths:
                paths[link] = f"{path(parents[link])}/{link}"
            return paths[link]

        zero = description.joint_transforms({})
        self._frames: dict[str, Any] = {}
        for joint in description.joints:
            transform = zero[joint.child]
            frame = scene.add_frame(path(joint.child), show_axes=False, position=transform[:3, 3],
                                    wxyz=matrix_to_quat_wxyz(transform[:3, :3]))  # fmt: skip
            if joint.type in MOVING_TYPES:
                self._frames[joint.name] = frame
        self._moving = [j for j in description.joints if j.name in self._frames]
        self._joint_index = {name: i for i, name in enumerate(description.motor_joints)}
        self._meshes: dict[str, list[Any]] = {}
        self._colors: dict[str, RGB] = {}
        for i, (visual, mesh) in enumerate(zip(description.visuals, meshes)):
            rgb = color if color is not None else tuple(visual.rgba[:3])
            handle = scene.add_mesh_simple(f"{path(visual.link)}/visual{i}", mesh.vertices, mesh.faces,
                                           color=rgb255(rgb), opacity=opacity if opacity < 1.0 else None,
                                           cast_shadow=False, receive_shadow=False)  # fmt: skip
            self._meshes.setdefault(visual.link, []).append(handle)
            self._colors[visual.link] = rgb
        self._shown_colors = dict(self._colors)

    @property
    def visible(self) -> bool:
        return bool(self._root.visible)

    @visible.setter
    def visible(self, value: bool) -> None:
        if bool(self._root.visible) != value:
            self._root.visible = value

    def pose(self, pose: BodyPose) -> None:
        """Root at the pose's root, every moving joint at its angle (motor order)."""
        self._root.position = np.asarray(pose.pelvis_pos, dtype=np.float64)
        self._root.wxyz = np.asarray(pose.pelvis_quat_wxyz, dtype=np.float64)
        angles = {name: float(pose.q[i]) for name, i in self._joint_index.items()}
        transforms = self._description.joint_transforms(angles)
        for joint in self._moving:
            self._frames[joint.name].wxyz = matrix_to_quat_wxyz(transforms[joint.child][:3, :3])

    def tint_links(self, colors: Mapping[str, RGB | None]) -> None:
        """Colour each named link's meshes (``None``: its own colour); only changes are sent."""
        for link, rgb in colors.items():
            wanted = rgb if rgb is not None else self._colors.get(link)
            if link in self._meshes and wanted != self._shown_colors.get(link):
                for handle in self._meshes[link]:
                    handle.color = rgb255(wanted)
                self._shown_colors[link] = wanted

    def motor_links(self) -> dict[str, str]:
        """Motor joint name -> the link it moves."""
        return {j.name: j.child for j in self._description.joints if j.name in self._joint_index}
