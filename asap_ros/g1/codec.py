"""Raw ``unitree_hg`` samples <-> the core's types: ``LowState_`` -> :class:`RobotState`,
:class:`JointCommand` -> ``LowCmd_`` (mode_machine from the robot, CRC last), and the damping
command. Works on raw XCDR1 bytes only (no SDK import): decoding reads the sample's C bytes
directly (two gathers, no structured-field access), encoding writes the command into
preallocated C bytes; both sit on the control path. SDK objects: :mod:`asap_ros.g1.sdk`.
"""

from __future__ import annotations

import struct
from operator import attrgetter

import numpy as np

from asap_ros.core.state import NUM_MOTORS, JointCommand, RobotState
from asap_ros.g1.crc import hg_crc32
from asap_ros.g1.layout import (
    LOWCMD_LAYOUT,
    LOWCMD_WIRE,
    LOWSTATE_LAYOUT,
    LOWSTATE_WIRE,
    MOTOR_CMD_LAYOUT,
    MOTOR_STATE_LAYOUT,
    field_of,
    field_offset,
    record_bytes,
)

_U32 = struct.Struct("<I")


class _LowStateReader:
    """Reads a :class:`RobotState` from the bytes of a C-layout LowState (CRC checked here).

    Every float32 value the state needs comes out in one gather and each motor's two
    temperature sensors in another; the state's arrays are views of one float64 array
    allocated per call (the state owns it).
    """

    def __init__(self) -> None:
        motors = field_offset(LOWSTATE_LAYOUT, "motor_state") + MOTOR_STATE_LAYOUT.itemsize * np.arange(NUM_MOTORS)

        def imu(name: str, count: int) -> np.ndarray:
            return field_offset(LOWSTATE_LAYOUT, f"imu_state.{name}") + 4 * np.arange(count)

        floats = [  # RobotState fields in the order of __call__
            motors + field_offset(MOTOR_STATE_LAYOUT, "q"),
            motors + field_offset(MOTOR_STATE_LAYOUT, "dq"),
            motors + field_offset(MOTOR_STATE_LAYOUT, "tau_est"),
            imu("quaternion", 4),
            imu("gyroscope", 3),
            imu("accelerometer", 3),
        ]
        self._float_words = np.concatenate(floats) // 4
        temperature = motors + field_offset(MOTOR_STATE_LAYOUT, "temperature")
        self._temperature_halves = np.stack([temperature, temperature + 2]) // 2  # [2, 29] int16 indices
        bounds = np.cumsum([0, *map(len, floats), NUM_MOTORS]).tolist()
        self._parts = [slice(a, b) for a, b in zip(bounds, bounds[1:])]
        self._size = bounds[-1]
        self._temperature = self._parts[-1]
        self._tick_at = field_offset(LOWSTATE_LAYOUT, "tick")
        self._mode_machine_at = field_offset(LOWSTATE_LAYOUT, "mode_machine")
        self._crc_at = field_offset(LOWSTATE_LAYOUT, "crc")
        remote = field_offset(LOWSTATE_LAYOUT, "wireless_remote")
        self._remote = slice(remote, remote + field_of(LOWSTATE_LAYOUT, "wireless_remote")[0].itemsize)

    def __call__(self, c: bytes | bytearray, stamp_ns: int) -> RobotState:
        values = np.empty(self._size)
        values[: self._temperature.start] = np.frombuffer(c, dtype="<f4").take(self._float_words)
        halves = np.frombuffer(c, dtype="<i2").take(self._temperature_halves)
        np.maximum(halves[0], halves[1], out=values[self._temperature])
        q, dq, tau_est, quat_wxyz, gyro, acc, temperature = [values[part] for part in self._parts]
        return RobotState(
            stamp_ns=stamp_ns,
            tick=_U32.unpack_from(c, self._tick_at)[0],
            mode_machine=c[self._mode_machine_at],
            q=q,
            dq=dq,
            tau_est=tau_est,
            temperature=temperature,
            quat_wxyz=quat_wxyz,
            gyro=gyro,
            acc=acc,
            crc_ok=_U32.unpack_from(c, self._crc_at)[0] == hg_crc32(c),
            wireless_remote=bytes(c[self._remote]),
        )


_read_lowstate = _LowStateReader()


def state_from_record(record: np.ndarray, stamp_ns: int) -> RobotState:
    """:class:`RobotState` of a C-layout LowState record (CRC checked here)."""
    return _read_lowstate(record_bytes(record).tobytes(), stamp_ns)


def decode_lowstate_cdr(payload: bytes, stamp_ns: int) -> RobotState:
    """:class:`RobotState` of a raw ``LowState_`` sample (:class:`asap_ros.runtime.dds.RawReader`) that
    arrived at ``stamp_ns``, skipping the SDK's ~0.5 ms Python deserialiser; a wrong size or
    encoding raises ``ValueError``. ``crc_ok`` reports the CRC check; ``temperature`` is the
    hotter of each motor's two sensors."""
    return _read_lowstate(LOWSTATE_WIRE.c_bytes(payload), stamp_ns)


# --- encode -------------------------------------------------------------------------------


_FLOAT32_ROUNDS_TO_INF = 2.0**128 - 2.0**103
"""Smallest float64 magnitude that rounds to an infinite float32 (halfway past the largest finite)."""
_LOWCMD_MODE_MACHINE_AT = field_offset(LOWCMD_LAYOUT, "mode_machine")
_LOWCMD_CRC_AT = field_offset(LOWCMD_LAYOUT, "crc")


class LowCmdEncoder:
    """Writes each command into one preallocated C-layout ``LowCmd_`` and returns it as XCDR1.

    The 29 G1 motors get the command; slots 29-34 stay disabled and zero. ``mode_pr`` is 0
    (pitch/roll ankle mode), ``mode_machine`` is the value the robot reports, the CRC is set
    last. (An SDK ``LowCmd_`` object instead: :class:`asap_ros.g1.sdk.SdkLowCmdEncoder`.)
    """

    _FLOAT_FIELDS = ("q", "dq", "tau", "kp", "kd")
    _float_fields = attrgetter(*_FLOAT_FIELDS)

    def __init__(self) -> None:
        self._c = bytearray(LOWCMD_LAYOUT.itemsize)  # mode_pr and slots 29-34 stay 0
        self._record = np.frombuffer(self._c, dtype=LOWCMD_LAYOUT).reshape(())
        record = np.frombuffer(self._c, dtype=np.uint8)
        start, slot = field_offset(LOWCMD_LAYOUT, "motor_cmd"), MOTOR_CMD_LAYOUT.itemsize
        driven = record[start : start + NUM_MOTORS * slot]
        # views of the driven slots: mode bytes, and float32 words [mode+pad, q, dq, tau, kp, kd, reserve]
        self._modes = driven[::slot]
        self._floats = driven.view("<f4").reshape(NUM_MOTORS, -1)[:, 1:6]
        self._values = np.empty((len(self._FLOAT_FIELDS), NUM_MOTORS))  # float64, one row per field
        self._flat_values = self._values.reshape(-1)
        self._magnitudes = np.empty_like(self._values)

    def _fill(self, cmd: JointCommand, mode_machine: int) -> int:
        """Write ``cmd`` into the C-layout record; returns its CRC (also stored in the record)."""
        if not 0 <= mode_machine <= 255:
            raise ValueError(f"mode_machine must be 0..255 (from LowState), got {mode_machine!r}")
        values = self._values
        np.concatenate(self._float_fields(cmd), out=self._flat_values)
        if not np.abs(values, out=self._magnitudes).max() < _FLOAT32_ROUNDS_TO_INF:
            motor, column = np.argwhere(~(np.abs(values.T) < _FLOAT32_ROUNDS_TO_INF))[0]
            name = self._FLOAT_FIELDS[column]
            raise ValueError(f"JointCommand.{name}[{motor}] is not a finite float32: {getattr(cmd, name)[motor]!r}")
        np.copyto(self._floats, values.T)  # every value in float32 range: no overflow
        self._modes[:] = cmd.enabled  # True -> MOTOR_ENABLED, False -> MOTOR_OFF
        self._c[_LOWCMD_MODE_MACHINE_AT] = mode_machine
        crc = hg_crc32(self._c)
        _U32.pack_into(self._c, _LOWCMD_CRC_AT, crc)
        return crc

    def encode_cdr(self, cmd: JointCommand, mode_machine: int) -> bytes:
        """The XCDR1 sample of ``cmd`` for :class:`asap_ros.runtime.dds.RawWriter` (no SDK serialiser);
        a non-finite value or a bad ``mode_machine`` raises ``ValueError``."""
        self._fill(cmd, mode_machine)
        return LOWCMD_WIRE.to_cdr(self._record)


def damping_command(kd: np.ndarray) -> JointCommand:
    """Pure damping: kp 0, dq 0, tau 0, the given kd, every motor enabled."""
    kd = np.asarray(kd, dtype=np.float64)
    if kd.shape != (NUM_MOTORS,):
        raise ValueError(f"kd must have shape ({NUM_MOTORS},), got {kd.shape}")
    return JointCommand(kd=kd.copy(), enabled=np.ones(NUM_MOTORS, dtype=bool))
