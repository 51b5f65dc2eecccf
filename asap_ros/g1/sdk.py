"""``unitree_sdk2py`` ``unitree_hg`` objects <-> C-layout records and the core's types: CRC checks
of SDK messages, decoding an SDK ``LowState_``, and an encoder that fills an SDK ``LowCmd_``.
The control path uses raw samples instead (:mod:`asap_ros.g1.codec`, no SDK import).
"""

from __future__ import annotations

import struct
from operator import attrgetter
from typing import Any

import numpy as np

from asap_ros.core.state import NUM_MOTORS, JointCommand, RobotState
from asap_ros.g1.codec import LowCmdEncoder, state_from_record
from asap_ros.g1.crc import record_crc
from asap_ros.g1.layout import LOWCMD_LAYOUT, LOWSTATE_LAYOUT, NUM_SLOTS

# struct formats of the same C layouts (the SDK's), to pack received SDK objects in one call
LOWCMD_STRUCT = struct.Struct("<2B2x" + "B3x5fI" * NUM_SLOTS + "5I")
LOWSTATE_STRUCT = struct.Struct("<2I2B2xI" + "13fh2x" + "B3x4f2hf7I" * NUM_SLOTS + "40B5I")
assert LOWCMD_STRUCT.size == LOWCMD_LAYOUT.itemsize == 1004
assert LOWSTATE_STRUCT.size == LOWSTATE_LAYOUT.itemsize == 2092


_MOTOR_CMD_FIELDS = attrgetter("mode", "q", "dq", "tau", "kp", "kd", "reserve")
_MOTOR_STATE_SCALARS = attrgetter("mode", "q", "dq", "ddq", "tau_est")


def lowcmd_record(msg: Any) -> np.ndarray:
    """C-layout record of an SDK ``unitree_hg`` ``LowCmd_`` (values as float32, like the wire)."""
    values: list[Any] = [msg.mode_pr, msg.mode_machine]
    for motor in msg.motor_cmd:
        values += _MOTOR_CMD_FIELDS(motor)
    values += msg.reserve
    values.append(msg.crc)
    return np.frombuffer(LOWCMD_STRUCT.pack(*values), dtype=LOWCMD_LAYOUT).reshape(())


def lowstate_record(msg: Any) -> np.ndarray:
    """C-layout record of an SDK ``unitree_hg`` ``LowState_``."""
    values: list[Any] = list(msg.version)
    values += (msg.mode_pr, msg.mode_machine, msg.tick)
    imu = msg.imu_state
    values += imu.quaternion
    values += imu.gyroscope
    values += imu.accelerometer
    values += imu.rpy
    values.append(imu.temperature)
    for motor in msg.motor_state:
        values += _MOTOR_STATE_SCALARS(motor)
        values += motor.temperature
        values.append(motor.vol)
        values += motor.sensor
        values.append(motor.motorstate)
        values += motor.reserve
    values += msg.wireless_remote
    values += msg.reserve
    values.append(msg.crc)
    return np.frombuffer(LOWSTATE_STRUCT.pack(*values), dtype=LOWSTATE_LAYOUT).reshape(())


def lowcmd_crc_ok(msg: Any) -> bool:
    """Whether an SDK ``LowCmd_`` carries the CRC of its content."""
    record = lowcmd_record(msg)
    return int(record["crc"]) == record_crc(record)


def lowstate_crc_ok(msg: Any) -> bool:
    """Whether an SDK ``LowState_`` carries the CRC of its content."""
    record = lowstate_record(msg)
    return int(record["crc"]) == record_crc(record)


def decode_lowstate(msg: Any, stamp_ns: int) -> RobotState:
    """:class:`RobotState` of an SDK ``LowState_`` that arrived at ``stamp_ns``.

    ``crc_ok`` reports the CRC check; ``temperature`` is the hotter of each motor's two sensors.
    """
    return state_from_record(lowstate_record(msg), stamp_ns)


class SdkLowCmdEncoder(LowCmdEncoder):
    """Fills one preallocated SDK ``LowCmd_`` per call (the same object every time), with the
    values, mode bytes and CRC of :meth:`LowCmdEncoder.encode_cdr`. The returned message must be
    written before the next ``encode``."""

    def __init__(self) -> None:
        from unitree_sdk2py.idl.default import unitree_hg_msg_dds__LowCmd_

        super().__init__()
        self.msg = unitree_hg_msg_dds__LowCmd_()
        self._motor_msgs = self.msg.motor_cmd[:NUM_MOTORS]

    def encode(self, cmd: JointCommand, mode_machine: int) -> Any:
        """The LowCmd_ for ``cmd``; a non-finite value or a bad ``mode_machine`` raises ``ValueError``."""
        crc = self._fill(cmd, mode_machine)
        modes = self._modes.tolist()
        for motor, mode, (q, dq, tau, kp, kd) in zip(self._motor_msgs, modes, self._floats.tolist()):
            motor.mode, motor.q, motor.dq, motor.tau, motor.kp, motor.kd = mode, q, dq, tau, kp, kd
        msg = self.msg
        msg.mode_pr = 0
        msg.mode_machine = mode_machine
        msg.crc = crc
        return msg
