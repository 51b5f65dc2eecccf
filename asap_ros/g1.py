"""Unitree G1 ``unitree_hg`` protocol adapter: LowState -> RobotState, JointCommand -> LowCmd.

The robot checks a CRC32 over each ``LowCmd_`` and stamps one on each ``LowState_``. The CRC
is the SDK's (``unitree_sdk2py.utils.crc.CRC``): the message is laid out as the C struct
(little-endian, natural alignment, zero padding), read as 32-bit words (all but the final
``crc`` word) and fed most significant bit first through CRC-32 polynomial 0x04C11DB7,
initial value 0xFFFFFFFF, no reflection, no final XOR. That equals ``zlib.crc32`` over the
same words bit-reversed, complemented and bit-reversed back, which runs in C here instead of
the SDK's per-word Python loop (equality with the SDK is tested). Decoding reads the raw
sample's C bytes directly (two gathers, no structured-field access), encoding writes the
command into preallocated C bytes: both sit on the control path.

The C layouts are numpy structured dtypes (``LOWCMD_LAYOUT``, ``LOWSTATE_LAYOUT``). On the
wire (XCDR1) the same bytes appear except around the first motor slot, where CDR packs
``motor[0].mode`` straight after the preceding field; :class:`WireLayout` converts between
the two so the simulator can write and read raw DDS samples without the slow Python
(de)serialiser.
"""

from __future__ import annotations

import array
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

_BITREV8 = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))
"""``bytes.translate`` table reversing the bits of every byte."""
assert sys.byteorder == "little" and array.array("I").itemsize == 4, "the hg CRC needs 32-bit little-endian words"


def _bitrev32(value: int) -> int:
    return int.from_bytes(value.to_bytes(4, "little").translate(_BITREV8), "big")


def hg_crc32(c_bytes: np.ndarray | bytes | bytearray) -> int:
    """The SDK's CRC of one C-layout message: over every 32-bit word except the last (``crc``)."""
    data = c_bytes if isinstance(c_bytes, (bytes, bytearray)) else np.asarray(c_bytes, dtype=np.uint8).tobytes()
    # a word MSB first == its bytes last to first, each bit-reversed, fed to the reflected zlib CRC
    words = array.array("I", data.translate(_BITREV8))
    words.byteswap()
    return _bitrev32(zlib.crc32(memoryview(words)[:-1]) ^ 0xFFFFFFFF)


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
        self._gap = bytes(self._slots - preceding_end - 1)
        self.cdr_size = len(self.CDR_HEADER) + layout.itemsize - 4

    def to_cdr(self, record: np.ndarray) -> bytes:
        """XCDR1 sample (with encapsulation header) of a C-layout record."""
        c = memoryview(_record_bytes(record))
        p, s = self._preceding_end, self._slots
        return b"".join((self.CDR_HEADER, c[:p], c[s : s + 1], self._gap, c[s + 4 :]))

    def c_bytes(self, payload: bytes) -> bytearray:
        """C-layout bytes (zero padding) of an XCDR1 sample; wrong size or encoding raises ``ValueError``."""
        if len(payload) != self.cdr_size:
            raise ValueError(f"payload is {len(payload)} bytes, expected {self.cdr_size}")
        if payload[:4] != self.CDR_HEADER:
            raise ValueError(f"unsupported encapsulation header {bytes(payload[:4]).hex()}")
        body = memoryview(payload)[4:]
        p, s = self._preceding_end, self._slots
        c = bytearray(self.layout.itemsize)
        c[:p] = body[:p]
        c[s] = body[p]
        c[s + 4 :] = body[s:]
        return c

    def from_cdr(self, payload: bytes) -> np.ndarray:
        """C-layout record of an XCDR1 sample (writable, its own memory); see :meth:`c_bytes`."""
        # Never .copy() a record: numpy does not copy the padding bytes.
        return np.frombuffer(self.c_bytes(payload), dtype=self.layout).reshape(())


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


def _offset(layout: np.dtype, path: str) -> int:
    """Byte offset of a nested field (``"imu_state.gyroscope"``) in a structured layout."""
    offset = 0
    for name in path.split("."):
        layout, field_offset = layout.fields[name][:2]
        offset += field_offset
    return offset


_U32 = struct.Struct("<I")


class _LowStateReader:
    """Reads a :class:`RobotState` from the bytes of a C-layout LowState (CRC checked here).

    Every float32 value the state needs comes out in one gather and each motor's two
    temperature sensors in another; the state's arrays are views of one float64 array
    allocated per call (the state owns it).
    """

    def __init__(self) -> None:
        motors = LOWSTATE_LAYOUT.fields["motor_state"][1] + _MOTOR_STATE.itemsize * np.arange(NUM_MOTORS)

        def imu(name: str, count: int) -> np.ndarray:
            return _offset(LOWSTATE_LAYOUT, f"imu_state.{name}") + 4 * np.arange(count)

        floats = [  # RobotState fields in the order of __call__
            motors + _MOTOR_STATE.fields["q"][1],
            motors + _MOTOR_STATE.fields["dq"][1],
            motors + _MOTOR_STATE.fields["tau_est"][1],
            imu("quaternion", 4),
            imu("gyroscope", 3),
            imu("accelerometer", 3),
        ]
        self._float_words = np.concatenate(floats) // 4
        temperature = motors + _MOTOR_STATE.fields["temperature"][1]
        self._temperature_halves = np.stack([temperature, temperature + 2]) // 2  # [2, 29] int16 indices
        self._motor_error_words = (motors + _MOTOR_STATE.fields["motorstate"][1]) // 4
        bounds = np.cumsum([0, *map(len, floats), NUM_MOTORS]).tolist()
        self._parts = [slice(a, b) for a, b in zip(bounds, bounds[1:])]
        self._size = bounds[-1]
        self._temperature = self._parts[-1]
        self._tick_at = _offset(LOWSTATE_LAYOUT, "tick")
        self._mode_machine_at = _offset(LOWSTATE_LAYOUT, "mode_machine")
        self._crc_at = _offset(LOWSTATE_LAYOUT, "crc")
        remote = _offset(LOWSTATE_LAYOUT, "wireless_remote")
        self._remote = slice(remote, remote + LOWSTATE_LAYOUT.fields["wireless_remote"][0].itemsize)

    def __call__(self, c: bytes | bytearray, stamp_ns: int, arrival_ns: int) -> RobotState:
        values = np.empty(self._size)
        values[: self._temperature.start] = np.frombuffer(c, dtype="<f4").take(self._float_words)
        halves = np.frombuffer(c, dtype="<i2").take(self._temperature_halves)
        np.maximum(halves[0], halves[1], out=values[self._temperature])
        q, dq, tau_est, quat_wxyz, gyro, acc, temperature = [values[part] for part in self._parts]
        return RobotState(
            stamp_ns=stamp_ns,
            arrival_ns=arrival_ns,
            tick=_U32.unpack_from(c, self._tick_at)[0],
            mode_machine=c[self._mode_machine_at],
            q=q,
            dq=dq,
            tau_est=tau_est,
            temperature=temperature,
            motor_error=np.frombuffer(c, dtype="<u4").take(self._motor_error_words),
            quat_wxyz=quat_wxyz,
            gyro=gyro,
            acc=acc,
            crc_ok=_U32.unpack_from(c, self._crc_at)[0] == hg_crc32(c),
            wireless_remote=bytes(c[self._remote]),
        )


_read_lowstate = _LowStateReader()


def state_from_record(record: np.ndarray, stamp_ns: int, arrival_ns: int) -> RobotState:
    """:class:`RobotState` of a C-layout LowState record (CRC checked here)."""
    return _read_lowstate(_record_bytes(record).tobytes(), stamp_ns, arrival_ns)


def decode_lowstate(msg, stamp_ns: int, arrival_ns: int) -> RobotState:
    """:class:`RobotState` of an SDK ``LowState_`` that arrived at ``stamp_ns`` (system clock),
    ``arrival_ns`` (monotonic clock).

    ``crc_ok`` reports the CRC check; ``temperature`` is the hotter of each motor's two sensors.
    """
    return state_from_record(lowstate_record(msg), stamp_ns, arrival_ns)


def decode_lowstate_cdr(payload: bytes, stamp_ns: int, arrival_ns: int) -> RobotState:
    """:func:`decode_lowstate` of a raw sample (:class:`asap_ros.dds.RawReader`), skipping the SDK's
    ~0.5 ms Python deserialiser; a wrong size or encoding raises ``ValueError``."""
    return _read_lowstate(LOWSTATE_WIRE.c_bytes(payload), stamp_ns, arrival_ns)


# --- encode -------------------------------------------------------------------------------


_FLOAT32_ROUNDS_TO_INF = 2.0**128 - 2.0**103
"""Smallest float64 magnitude that rounds to an infinite float32 (halfway past the largest finite)."""
_LOWCMD_MODE_MACHINE_AT = _offset(LOWCMD_LAYOUT, "mode_machine")
_LOWCMD_CRC_AT = _offset(LOWCMD_LAYOUT, "crc")


class LowCmdEncoder:
    """Fills one preallocated SDK ``LowCmd_`` per call (the same object every time).

    The 29 G1 motors get the command; slots 29-34 stay disabled and zero. ``mode_pr`` is 0
    (pitch/roll ankle mode), ``mode_machine`` is the value the robot reports, the CRC is set
    last. The returned message must be written before the next ``encode``.
    """

    _FLOAT_FIELDS = ("q", "dq", "tau", "kp", "kd")
    _float_fields = attrgetter(*_FLOAT_FIELDS)

    def __init__(self) -> None:
        from unitree_sdk2py.idl.default import unitree_hg_msg_dds__LowCmd_

        self.msg = unitree_hg_msg_dds__LowCmd_()
        self._c = bytearray(LOWCMD_LAYOUT.itemsize)  # mode_pr and slots 29-34 stay 0
        self._record = np.frombuffer(self._c, dtype=LOWCMD_LAYOUT).reshape(())
        record = np.frombuffer(self._c, dtype=np.uint8)
        start, slot = LOWCMD_LAYOUT.fields["motor_cmd"][1], _MOTOR_CMD.itemsize
        driven = record[start : start + NUM_MOTORS * slot]
        # views of the driven slots: mode bytes, and float32 words [mode+pad, q, dq, tau, kp, kd, reserve]
        self._modes = driven[::slot]
        self._floats = driven.view("<f4").reshape(NUM_MOTORS, -1)[:, 1:6]
        self._values = np.empty((len(self._FLOAT_FIELDS), NUM_MOTORS))  # float64, one row per field
        self._flat_values = self._values.reshape(-1)
        self._magnitudes = np.empty_like(self._values)
        self._motor_msgs = self.msg.motor_cmd[:NUM_MOTORS]

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

    def encode(self, cmd: JointCommand, mode_machine: int):
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
