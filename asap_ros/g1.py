"""Unitree G1 ``unitree_hg`` protocol adapter: LowState -> RobotState, JointCommand -> LowCmd.

The robot checks a CRC32 over each ``LowCmd_`` and stamps one on each ``LowState_``. The CRC
is the SDK's (``unitree_sdk2py.utils.crc.CRC``): the message is laid out as the C struct
(little-endian, natural alignment, zero padding), read as 32-bit words (all but the final
``crc`` word) and fed most significant bit first through CRC-32 polynomial 0x04C11DB7,
initial value 0xFFFFFFFF, no reflection, no final XOR. That equals ``zlib.crc32`` over the
same words bit-reversed, complemented and bit-reversed back, which runs in C here instead of
the SDK's per-word Python loop (equality with the SDK is tested).

The C layouts are numpy structured dtypes (``LOWCMD_LAYOUT``, ``LOWSTATE_LAYOUT``). On the
wire (XCDR1) the same bytes appear except around the first motor slot, where CDR packs
``motor[0].mode`` straight after the preceding field; :class:`WireLayout` converts between
the two so the simulator can write and read raw DDS samples without the slow Python
(de)serialiser.
"""

from __future__ import annotations

import struct
import sys
import zlib
from operator import attrgetter

import numpy as np

from asap_ros.state import NUM_MOTORS, JointCommand, RobotState

NUM_SLOTS = 35
"""Motor slots in hg LowCmd_/LowState_; the G1 drives the first 29, the rest stay disabled."""

MOTOR_ENABLED = 1
MOTOR_OFF = 0

_MOTOR_CMD = np.dtype(
    [("mode", "u1"), ("q", "<f4"), ("dq", "<f4"), ("tau", "<f4"), ("kp", "<f4"), ("kd", "<f4"), ("reserve", "<u4")],
    align=True,
)
LOWCMD_LAYOUT = np.dtype(
    [
        ("mode_pr", "u1"),
        ("mode_machine", "u1"),
        ("motor_cmd", _MOTOR_CMD, (NUM_SLOTS,)),
        ("reserve", "<u4", (4,)),
        ("crc", "<u4"),
    ],
    align=True,
)
_IMU = np.dtype(
    [
        ("quaternion", "<f4", (4,)),
        ("gyroscope", "<f4", (3,)),
        ("accelerometer", "<f4", (3,)),
        ("rpy", "<f4", (3,)),
        ("temperature", "<i2"),
    ],
    align=True,
)
_MOTOR_STATE = np.dtype(
    [
        ("mode", "u1"),
        ("q", "<f4"),
        ("dq", "<f4"),
        ("ddq", "<f4"),
        ("tau_est", "<f4"),
        ("temperature", "<i2", (2,)),
        ("vol", "<f4"),
        ("sensor", "<u4", (2,)),
        ("motorstate", "<u4"),
        ("reserve", "<u4", (4,)),
    ],
    align=True,
)
LOWSTATE_LAYOUT = np.dtype(
    [
        ("version", "<u4", (2,)),
        ("mode_pr", "u1"),
        ("mode_machine", "u1"),
        ("tick", "<u4"),
        ("imu_state", _IMU),
        ("motor_state", _MOTOR_STATE, (NUM_SLOTS,)),
        ("wireless_remote", "u1", (40,)),
        ("reserve", "<u4", (4,)),
        ("crc", "<u4"),
    ],
    align=True,
)

# struct formats of the same C layouts (the SDK's), to pack received SDK objects in one call
_LOWCMD_STRUCT = struct.Struct("<2B2x" + "B3x5fI" * NUM_SLOTS + "5I")
_LOWSTATE_STRUCT = struct.Struct("<2I2B2xI" + "13fh2x" + "B3x4f2hf7I" * NUM_SLOTS + "40B5I")
assert _LOWCMD_STRUCT.size == LOWCMD_LAYOUT.itemsize == 1004
assert _LOWSTATE_STRUCT.size == LOWSTATE_LAYOUT.itemsize == 2092

_BITREV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=np.uint16)
_BITREV16 = (_BITREV8[np.arange(1 << 16) & 0xFF] << 8) | _BITREV8[np.arange(1 << 16) >> 8]
_BITREV16_LIST = _BITREV16.tolist()
assert sys.byteorder == "little", "the hg CRC helpers assume a little-endian host"


def _bitrev32(value: int) -> int:
    return _BITREV16_LIST[value & 0xFFFF] << 16 | _BITREV16_LIST[value >> 16]


def hg_crc32(c_bytes: np.ndarray | bytes) -> int:
    """The SDK's CRC of one C-layout message: over every 32-bit word except the last (``crc``)."""
    data = np.frombuffer(c_bytes, dtype=np.uint8) if isinstance(c_bytes, (bytes, bytearray)) else c_bytes
    high_half_first = data[:-4].view("<u2").reshape(-1, 2)[:, ::-1]
    # bit-reversed words fed to the reflected zlib CRC == the SDK's MSB-first CRC, reflected
    reflected = zlib.crc32(_BITREV16.take(high_half_first)) ^ 0xFFFFFFFF
    return _bitrev32(reflected)


def _record_bytes(record: np.ndarray) -> np.ndarray:
    """The bytes of a 0-d structured record (a view, no copy)."""
    return record.reshape(1).view(np.uint8)


class WireLayout:
    """Converts one hg message between its C layout (what the CRC covers) and XCDR1 bytes.

    In CDR the first motor slot is not padded to 4 bytes: its ``mode`` byte follows the
    preceding field directly; everything from ``motor[0].q`` on sits 4 bytes earlier than in C.
    """

    CDR_HEADER = b"\x00\x01\x00\x00"  # XCDR1, little-endian

    def __init__(self, layout: np.dtype, slots_field: str, preceding_end: int):
        self.layout = layout
        self._slots = layout.fields[slots_field][1]
        self._preceding_end = preceding_end
        self.cdr_size = len(self.CDR_HEADER) + layout.itemsize - 4

    def to_cdr(self, record: np.ndarray) -> bytes:
        """XCDR1 sample (with encapsulation header) of a C-layout record."""
        c = _record_bytes(record).tobytes()
        p, s = self._preceding_end, self._slots
        return b"".join((self.CDR_HEADER, c[:p], c[s : s + 1], bytes(s - p - 1), c[s + 4 :]))

    def from_cdr(self, payload: bytes) -> np.ndarray:
        """C-layout record of an XCDR1 sample; wrong size or encoding raises ``ValueError``."""
        if len(payload) != self.cdr_size:
            raise ValueError(f"payload is {len(payload)} bytes, expected {self.cdr_size}")
        if payload[:4] != self.CDR_HEADER:
            raise ValueError(f"unsupported encapsulation header {payload[:4].hex()}")
        body = payload[4:]
        p, s = self._preceding_end, self._slots
        c = b"".join((body[:p], bytes(s - p), body[p : p + 1], bytes(3), body[s:]))
        # bytearray: writable. Never .copy() a record: numpy does not copy the padding bytes.
        return np.frombuffer(bytearray(c), dtype=self.layout).reshape(())


LOWCMD_WIRE = WireLayout(LOWCMD_LAYOUT, "motor_cmd", preceding_end=2)
LOWSTATE_WIRE = WireLayout(LOWSTATE_LAYOUT, "motor_state", preceding_end=70)


def record_crc(record: np.ndarray) -> int:
    """CRC of a C-layout record (its own ``crc`` field excluded)."""
    return hg_crc32(_record_bytes(record))


# --- SDK objects -> C-layout records ------------------------------------------------------

_MOTOR_CMD_FIELDS = attrgetter("mode", "q", "dq", "tau", "kp", "kd", "reserve")
_MOTOR_STATE_SCALARS = attrgetter("mode", "q", "dq", "ddq", "tau_est")


def lowcmd_record(msg) -> np.ndarray:
    """C-layout record of an SDK ``unitree_hg`` ``LowCmd_`` (values as float32, like the wire)."""
    values: list = [msg.mode_pr, msg.mode_machine]
    for motor in msg.motor_cmd:
        values += _MOTOR_CMD_FIELDS(motor)
    values += msg.reserve
    values.append(msg.crc)
    return np.frombuffer(_LOWCMD_STRUCT.pack(*values), dtype=LOWCMD_LAYOUT).reshape(())


def lowstate_record(msg) -> np.ndarray:
    """C-layout record of an SDK ``unitree_hg`` ``LowState_``."""
    values: list = list(msg.version)
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
    return np.frombuffer(_LOWSTATE_STRUCT.pack(*values), dtype=LOWSTATE_LAYOUT).reshape(())


def lowcmd_crc_ok(msg) -> bool:
    """Whether an SDK ``LowCmd_`` carries the CRC of its content."""
    record = lowcmd_record(msg)
    return int(record["crc"]) == record_crc(record)


def lowstate_crc_ok(msg) -> bool:
    """Whether an SDK ``LowState_`` carries the CRC of its content."""
    record = lowstate_record(msg)
    return int(record["crc"]) == record_crc(record)


# --- decode -------------------------------------------------------------------------------


def state_from_record(record: np.ndarray, stamp_ns: int) -> RobotState:
    """:class:`RobotState` of a C-layout LowState record (CRC checked here)."""
    motors = record["motor_state"][:NUM_MOTORS]
    imu = record["imu_state"]
    return RobotState(
        stamp_ns=stamp_ns,
        tick=int(record["tick"]),
        mode_machine=int(record["mode_machine"]),
        q=motors["q"].astype(np.float64),
        dq=motors["dq"].astype(np.float64),
        tau_est=motors["tau_est"].astype(np.float64),
        temperature=motors["temperature"].max(axis=1).astype(np.float64),
        quat_wxyz=imu["quaternion"].astype(np.float64),
        gyro=imu["gyroscope"].astype(np.float64),
        acc=imu["accelerometer"].astype(np.float64),
        crc_ok=int(record["crc"]) == record_crc(record),
        wireless_remote=record["wireless_remote"].tobytes(),
    )


def decode_lowstate(msg, stamp_ns: int) -> RobotState:
    """:class:`RobotState` of an SDK ``LowState_`` that arrived at ``stamp_ns``.

    ``crc_ok`` reports the CRC check; ``temperature`` is the hotter of each motor's two sensors.
    """
    return state_from_record(lowstate_record(msg), stamp_ns)


def decode_lowstate_cdr(payload: bytes, stamp_ns: int) -> RobotState:
    """:func:`decode_lowstate` of a raw sample (:class:`asap_ros.dds.RawReader`), skipping the SDK's
    ~0.5 ms Python deserialiser; a wrong size or encoding raises ``ValueError``."""
    return state_from_record(LOWSTATE_WIRE.from_cdr(payload), stamp_ns)


# --- encode -------------------------------------------------------------------------------


class LowCmdEncoder:
    """Fills one preallocated SDK ``LowCmd_`` per call (the same object every time).

    The 29 G1 motors get the command; slots 29-34 stay disabled and zero. ``mode_pr`` is 0
    (pitch/roll ankle mode), ``mode_machine`` is the value the robot reports, the CRC is set
    last. The returned message must be written before the next ``encode``.
    """

    _FLOAT_FIELDS = ("q", "dq", "tau", "kp", "kd")

    def __init__(self) -> None:
        from unitree_sdk2py.idl.default import unitree_hg_msg_dds__LowCmd_

        self.msg = unitree_hg_msg_dds__LowCmd_()
        self._record = np.zeros((), dtype=LOWCMD_LAYOUT)
        self._driven = self._record["motor_cmd"][:NUM_MOTORS]
        # the driven slots as float32 words [mode+pad, q, dq, tau, kp, kd, reserve] (a view)
        start = LOWCMD_LAYOUT.fields["motor_cmd"][1]
        words = _record_bytes(self._record)[start : start + NUM_MOTORS * _MOTOR_CMD.itemsize].view("<f4")
        self._floats = words.reshape(NUM_MOTORS, -1)[:, 1:6]
        self._motor_msgs = self.msg.motor_cmd[:NUM_MOTORS]

    def _fill(self, cmd: JointCommand, mode_machine: int) -> int:
        """Write ``cmd`` into the C-layout record; returns its CRC (also stored in the record)."""
        if not 0 <= mode_machine <= 255:
            raise ValueError(f"mode_machine must be 0..255 (from LowState), got {mode_machine!r}")
        driven = self._driven
        with np.errstate(over="ignore", invalid="ignore"):  # checked below, on the float32 values
            for name in self._FLOAT_FIELDS:
                driven[name] = getattr(cmd, name)
        if not np.isfinite(self._floats).all():
            motor, column = np.argwhere(~np.isfinite(self._floats))[0]
            name = self._FLOAT_FIELDS[column]
            raise ValueError(f"JointCommand.{name}[{motor}] is not a finite float32: {getattr(cmd, name)[motor]!r}")
        driven["mode"] = cmd.enabled  # True -> MOTOR_ENABLED, False -> MOTOR_OFF
        self._record["mode_pr"] = 0
        self._record["mode_machine"] = mode_machine
        crc = record_crc(self._record)
        self._record["crc"] = crc
        return crc

    def encode(self, cmd: JointCommand, mode_machine: int):
        """The LowCmd_ for ``cmd``; a non-finite value or a bad ``mode_machine`` raises ``ValueError``."""
        crc = self._fill(cmd, mode_machine)
        modes = self._driven["mode"].tolist()
        for motor, mode, (q, dq, tau, kp, kd) in zip(self._motor_msgs, modes, self._floats.tolist()):
            motor.mode, motor.q, motor.dq, motor.tau, motor.kp, motor.kd = mode, q, dq, tau, kp, kd
        msg = self.msg
        msg.mode_pr = 0
        msg.mode_machine = mode_machine
        msg.crc = crc
        return msg

    def encode_cdr(self, cmd: JointCommand, mode_machine: int) -> bytes:
        """:meth:`encode` as a raw XCDR1 sample for :class:`asap_ros.dds.RawWriter` (no SDK serialiser)."""
        self._fill(cmd, mode_machine)
        return LOWCMD_WIRE.to_cdr(self._record)


def damping_command(kd: np.ndarray) -> JointCommand:
    """Pure damping: kp 0, dq 0, tau 0, the given kd, every motor enabled."""
    kd = np.asarray(kd, dtype=np.float64)
    if kd.shape != (NUM_MOTORS,):
        raise ValueError(f"kd must have shape ({NUM_MOTORS},), got {kd.shape}")
    return JointCommand(kd=kd.copy(), enabled=np.ones(NUM_MOTORS, dtype=bool))
