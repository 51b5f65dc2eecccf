"""The G1 robot description for viewers: ASAP's URDF with the 29 motor joints movable, meshes
on this machine, and its joint transforms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from asap_ros.config.robot import load_robot_model
from asap_ros.config.robot_description import (
    RobotDescription,
    load_robot_description,
    root_pose,
)  # fmt: skip
from asap_ros.core.errors import ConfigError


@pytest.fixture(scope="module")
def description(assets) -> RobotDescription:
    return load_robot_description()


def test_every_motor_joint_is_revolute_and_the_rest_fixed(description):
    motors = set(load_robot_model().joint_names)
    moving = {j.name for j in description.joints if j.type == "revolute"}
    assert moving == motors and len(moving) == 29
    assert all(j.type == "fixed" for j in description.joints if j.name not in motors)
    assert description.root_link == "pelvis"
    assert 'name="left_wrist_yaw_joint" type="revolute"' in description.xml


def test_meshes_are_absolute_file_uris_of_the_asset_folder(description, assets):
    assert description.visuals and all(v.mesh.is_file() for v in description.visuals)
    assert all(v.mesh.is_relative_to(assets) for v in description.visuals)
    assert f'filename="{(assets / "robots/g1/meshes/pelvis.STL").as_uri()}"' in description.xml


def test_joint_angles_move_the_links_below_them(description):
    zero = description.link_poses({})
    ankle = zero["left_ankle_roll_link"][:3, 3]
    assert ankle[2] == pytest.approx(-0.757, abs=0.005), "ankle below the pelvis in the zero pose"
    bent = description.link_poses({"left_knee_joint": 1.0})
    assert bent["left_knee_link"][:3, 3] == pytest.approx(zero["left_knee_link"][:3, 3])
    assert np.linalg.norm(bent["left_ankle_roll_link"][:3, 3] - ankle) > 0.1
    assert bent["right_ankle_roll_link"][:3, 3] == pytest.approx(zero["right_ankle_roll_link"][:3, 3])
    root = np.eye(4)
    root[:3, 3] = [1.0, 2.0, 0.8]
    shifted = description.link_poses({}, root_pose=root)
    assert shifted["torso_link"][:3, 3] == pytest.approx(zero["torso_link"][:3, 3] + [1.0, 2.0, 0.8])


def test_root_pose_prefers_mocap_and_falls_back_to_the_imu():
    position, quat, source = root_pose(((1.0, 2.0, 0.7), (1.0, 0.0, 0.0, 0.0)), (0.0, 1.0, 0.0, 0.0))
    assert source == "mocap" and position == pytest.approx([1.0, 2.0, 0.7]) and quat == pytest.approx([1, 0, 0, 0])
    position, quat, source = root_pose(None, (0.0, 1.0, 0.0, 0.0))
    assert source.startswith("IMU") and position[2] > 0.5 and quat == pytest.approx([0, 1, 0, 0])


def test_a_urdf_without_a_motor_joint_is_refused_naming_it(description, tmp_path: Path):
    broken = tmp_path / "g1.urdf"
    broken.write_text(description.source.read_text().replace('name="left_knee_joint"', 'name="left_knee"'))
    with pytest.raises(ConfigError) as failure:
        RobotDescription(broken, load_robot_model().joint_names)
    assert str(broken) in str(failure.value) and "left_knee_joint" in str(failure.value)


def test_an_unreadable_urdf_is_refused_naming_the_file(tmp_path: Path):
    bad = tmp_path / "g1.urdf"
    bad.write_text("<robot><link name='a'>")
    with pytest.raises(ConfigError, match=str(bad)):
        RobotDescription(bad, ["left_knee_joint"])
