"""The motion-capture pose's stamp as the control thread reads it: ``mocap/pose`` on DDS.

``geometry_msgs/msg/PoseStamped`` (wire type ``geometry_msgs::msg::dds_::PoseStamped_``) from a
:class:`~asap_ros.runtime.dds.PolledReader`, polled once per control step after its LowCmd is
written: no Python callback per pose (a Vicon's 100-200 Hz would wake a thread that takes the
GIL the control thread needs, up to four times a step).
"""

from __future__ import annotations

import struct

__all__ = ["MocapStamps", "dds_topic", "header_stamp_ns", "root_dds_topic"]

_CDR_LE, _CDR_BE = b"\x00\x01", b"\x00\x00"
"""Encapsulation identifiers of plain CDR, little and big endian."""


def dds_topic(ros_topic: str) -> str:
    """The DDS topic of a fully resolved ROS 2 topic name (``/mocap/pose`` -> ``rt/mocap/pose``)."""
    if not ros_topic.startswith("/"):
        raise ValueError(f"ROS topic {ros_topic!r} is not fully resolved (no leading '/')")
    return "rt" + ros_topic


def root_dds_topic(ros_topic: str) -> str:
    """The DDS topic of a ROS 2 topic name in the root namespace, relative or absolute
    (``mocap/pose`` and ``/mocap/pose`` -> ``rt/mocap/pose``)."""
    return dds_topic(ros_topic if ros_topic.startswith("/") else "/" + ros_topic)


def header_stamp_ns(payload: bytes) -> int:
    """``header.stamp`` (ns) of a serialised message whose first field is a ``std_msgs/Header``."""
    if len(payload) < 12 or payload[:2] not in (_CDR_LE, _CDR_BE):
        raise ValueError(f"not a plain CDR message with a header ({len(payload)} bytes, encapsulation {payload[:2].hex()})")
    sec, nanosec = struct.unpack_from("<iI" if payload[:2] == _CDR_LE else ">iI", payload, 4)
    return sec * 1_000_000_000 + nanosec


class MocapStamps:
    """The newest pose on ``topic`` (a DDS topic name), read when asked; :meth:`newest_ns` is 0
    before the first. Needs :func:`asap_ros.runtime.dds.init_channels` first."""

    def __init__(self, topic: str) -> None:
        from unitree_sdk2py.idl.geometry_msgs.msg.dds_ import PoseStamped_

        from asap_ros.runtime.dds import PolledReader

        self.topic = topic
        self._reader = PolledReader(topic, PoseStamped_)
        self.malformed = 0
        """Samples whose header could not be read (they are skipped)."""
        self._newest_ns = 0
        self._read: bytes | None = None

    def newest_ns(self) -> int:
        payload = self._reader.newest()[0]
        if payload is not None and payload is not self._read:
            self._read = payload
            try:
                self._newest_ns = header_stamp_ns(payload)
            except ValueError:
                self.malformed += 1
        return self._newest_ns

    def close(self) -> None:
        self._reader.close()
