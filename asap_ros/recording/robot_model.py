"""What Foxglove's 3D panel needs to show the robot from a bag, derived while recording.

``/robot_description`` (``std_msgs/String``, latched, written first): the G1's URDF
(:mod:`asap_ros.config.robot_description`). ``/tf_static`` (latched): the URDF's fixed joints.
``/tf`` at :data:`RATE_HZ`: ``world -> pelvis`` (the newest mocap pose; without a fresh one
the IMU orientation at standing height) and every motor joint's parent -> child transform at
the LowState's angles. ``/joint_states`` at the same rate: the 29 measured joints (position,
velocity, estimated torque). Stamps are the LowState's arrival in the recorder, the bag's
log time of it.

Runs on the recorder's writer thread; each derived step costs well under a millisecond
(decoding one LowState from its raw bytes, 38 small transforms, two serialisations).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asap_ros.config.robot_description import MOVING_TYPES, RobotDescription, root_pose
from asap_ros.core.quaternion import matrix_to_quat_wxyz, quat_wxyz_matrix
from asap_ros.recording import topics as T
from asap_ros.recording.typestore import recording_typestore

RATE_HZ = 50.0
WORLD_FRAME = "world"
MOCAP_FRESH_NS = 500_000_000

TOPICS: tuple[T.RecordedTopic, ...] = (
    T.RecordedTopic(T.ROBOT_DESCRIPTION, "std_msgs/msg/String", latched=True),
    T.RecordedTopic(T.TF_STATIC, "tf2_msgs/msg/TFMessage", latched=True),
    T.RecordedTopic(T.TF, "tf2_msgs/msg/TFMessage"),
    T.RecordedTopic(T.JOINT_STATES, "sensor_msgs/msg/JointState"),
)

Message = tuple[str, bytes]
"""(bag topic, CDR)."""


class RobotModelTopics:
    """Derives the robot-model topics from recorded LowState and mocap messages."""

    def __init__(self, description: RobotDescription, mocap_topic: str | None = T.MOCAP_POSE) -> None:
        self.description = description
        self.mocap_topic = mocap_topic
        self.topics = TOPICS
        self._store = recording_typestore()
        self._types = self._store.types
        self._period_ns = int(1e9 / RATE_HZ)
        self._next_ns = 0
        self._mocap: tuple[int, Any] | None = None
        self._moving = [j for j in description.joints if j.type in MOVING_TYPES]
        self._motor_index = {name: i for i, name in enumerate(description.motor_joints)}

    def _serialize(self, msg: Any, msgtype: str) -> bytes:
        return bytes(self._store.serialize_cdr(msg, msgtype))

    def _header(self, stamp_ns: int, frame: str) -> Any:
        stamp = self._types["builtin_interfaces/msg/Time"](sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)
        return self._types["std_msgs/msg/Header"](stamp=stamp, frame_id=frame)

    def _transform(self, stamp_ns: int, parent: str, child: str, matrix: np.ndarray) -> Any:
        t = self._types
        w, x, y, z = matrix_to_quat_wxyz(matrix[:3, :3])
        px, py, pz = (float(v) for v in matrix[:3, 3])
        transform = t["geometry_msgs/msg/Transform"](
            translation=t["geometry_msgs/msg/Vector3"](x=px, y=py, z=pz),
            rotation=t["geometry_msgs/msg/Quaternion"](x=float(x), y=float(y), z=float(z), w=float(w)),
        )
        return t["geometry_msgs/msg/TransformStamped"](header=self._header(stamp_ns, parent), child_frame_id=child,
                                                        transform=transform)  # fmt: skip

    def _tf(self, transforms: list[Any]) -> bytes:
        return self._serialize(self._types["tf2_msgs/msg/TFMessage"](transforms=transforms), "tf2_msgs/msg/TFMessage")

    def start_messages(self, stamp_ns: int) -> list[Message]:
        """The latched messages, written when the bag opens: the description first."""
        fixed = self.description.joint_transforms({})
        statics = [self._transform(stamp_ns, j.parent, j.child, fixed[j.child])
                   for j in self.description.joints if j.type not in MOVING_TYPES]  # fmt: skip
        description = self._types["std_msgs/msg/String"](data=self.description.xml)
        return [(T.ROBOT_DESCRIPTION, self._serialize(description, "std_msgs/msg/String")), (T.TF_STATIC, self._tf(statics))]

    def on_message(self, topic: str, log_time_ns: int, data: bytes) -> list[Message]:
        """Derived messages for one recorded message (most give none)."""
        if topic == self.mocap_topic:
            self._mocap = (log_time_ns, data)
        elif topic == T.LOWSTATE and log_time_ns >= self._next_ns:
            following = self._next_ns + self._period_ns
            self._next_ns = following if following > log_time_ns else log_time_ns + self._period_ns
            return self._from_lowstate(log_time_ns, data)
        return []

    def _root(self, stamp_ns: int, imu_quat_wxyz: np.ndarray) -> np.ndarray:
        mocap = None
        if self._mocap is not None and stamp_ns - self._mocap[0] < MOCAP_FRESH_NS:
            pose = self._store.deserialize_cdr(self._mocap[1], "geometry_msgs/msg/PoseStamped").pose
            p, o = pose.position, pose.orientation
            mocap = ((p.x, p.y, p.z), (o.w, o.x, o.y, o.z))
        position, quat, _ = root_pose(mocap, imu_quat_wxyz)
        root = np.eye(4)
        root[:3, :3], root[:3, 3] = quat_wxyz_matrix(quat), position
        return root

    def _from_lowstate(self, stamp_ns: int, data: bytes) -> list[Message]:
        from asap_ros.g1.codec import decode_lowstate_cdr

        try:
            state = decode_lowstate_cdr(data, stamp_ns, stamp_ns)  # the values only: no age is judged
        except ValueError:
            return []  # stored as received; the recorder counts undecodable LowStates itself
        names = self.description.motor_joints
        angles = {name: float(state.q[i]) for name, i in self._motor_index.items()}
        local = self.description.joint_transforms(angles)
        transforms = [self._transform(stamp_ns, WORLD_FRAME, self.description.root_link, self._root(stamp_ns, state.quat_wxyz))]
        transforms += [self._transform(stamp_ns, j.parent, j.child, local[j.child]) for j in self._moving]
        joints = self._types["sensor_msgs/msg/JointState"](
            header=self._header(stamp_ns, ""), name=list(names), position=np.asarray(state.q, dtype=np.float64),
            velocity=np.asarray(state.dq, dtype=np.float64), effort=np.asarray(state.tau_est, dtype=np.float64),
        )  # fmt: skip
        return [(T.TF, self._tf(transforms)), (T.JOINT_STATES, self._serialize(joints, "sensor_msgs/msg/JointState"))]
