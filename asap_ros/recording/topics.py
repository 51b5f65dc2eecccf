"""What a session bag holds: bag topic names, their types and where the messages come from.

DDS topics keep their ROS 2 name (DDS ``rt/lowstate`` is ROS ``/lowstate``); ROS topics are
recorded under their fully resolved name.
"""

from __future__ import annotations

from dataclasses import dataclass

LOWSTATE = "/lowstate"
LOWCMD = "/lowcmd"
POLICY_STEP = "/asap/policy_step"
TRANSITION = "/asap/transition"
EPISODE = "/asap/episode"
SESSION = "/asap/session"
MOCAP_POSE = "/mocap/pose"
MOCAP_ODOMETRY = "/mocap/odometry"
DIAGNOSTICS = "/diagnostics"
ROBOT_DESCRIPTION = "/robot_description"
TF = "/tf"
TF_STATIC = "/tf_static"
JOINT_STATES = "/joint_states"
"""The robot-model topics (for Foxglove's 3D panel), derived by :mod:`asap_ros.recording.robot_model`."""


@dataclass(frozen=True)
class RecordedTopic:
    """One topic of a session bag."""

    name: str
    """Topic name in the bag."""
    msgtype: str
    """ROS 2 message type, e.g. ``unitree_hg/msg/LowState``."""
    latched: bool = False
    """Offered as transient-local (``ros2 bag play`` re-publishes it latched)."""


DDS_TOPICS: dict[str, RecordedTopic] = {
    "rt/lowstate": RecordedTopic(LOWSTATE, "unitree_hg/msg/LowState"),
    "rt/lowcmd": RecordedTopic(LOWCMD, "unitree_hg/msg/LowCmd"),
    "rt/asap/policy_step": RecordedTopic(POLICY_STEP, "asap_ros/msg/PolicyStep"),
    "rt/asap/transition": RecordedTopic(TRANSITION, "asap_ros/msg/ModeTransition"),
}
"""Raw DDS topic -> bag topic (CDR bytes stored unchanged)."""

RECORDER_TOPICS: tuple[RecordedTopic, ...] = (
    RecordedTopic(EPISODE, "asap_ros/msg/Episode"),
    RecordedTopic(SESSION, "std_msgs/msg/String", latched=True),
)
"""Written by the recorder itself (``/asap/session`` carries the session description as JSON)."""

ROS_TYPES: dict[str, str] = {
    "mocap_pose": "geometry_msgs/msg/PoseStamped",
    "mocap_odometry": "nav_msgs/msg/Odometry",
    "diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
    "operator": "std_msgs/msg/String",
}
"""ROS inputs (config key of their topic name -> type), subscribed with rclpy."""
