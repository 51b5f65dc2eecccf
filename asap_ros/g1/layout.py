"""The ``unitree_hg`` wire layouts of ``LowCmd_`` and ``LowState_``: the C structs (what the CRC
covers) as numpy structured dtypes, and their XCDR1 form on DDS.

On the wire (XCDR1) the same bytes appear as in C except around the first motor slot, where
CDR packs ``motor[0].mode`` straight after the preceding field; :class:`WireLayout` converts
between the two, so raw DDS samples are read and written without the SDK's slow Python
(de)serialiser.
"""

from __future__ import annotations

import numpy as np

LOWSTATE_TOPIC = "rt/lowstate"
LOWCMD_TOPIC = "rt/lowcmd"
"""The G1's DDS topics: ``LowState_`` from the robot, ``LowCmd_`` to it."""

NUM_SLOTS = 35
"""Motor slots in hg LowCmd_/LowState_; the G1 drives the first 29, the rest stay disabled."""

MOTOR_ENABLED = 1
MOTOR_OFF = 0

MOTOR_CMD_LAYOUT = np.dtype(
    [("mode", "u1"), ("q", "<f4"), ("dq", "<f4"), ("tau", "<f4"), ("kp", "<f4"), ("kd", "<f4"), ("reserve", "<u4")],
    align=True,
)
LOWCMD_LAYOUT = np.dtype(
    [
        ("mode_pr", "u1"),
        ("mode_machine", "u1"),
        ("motor_cmd", MOTOR_CMD_LAYOUT, (NUM_SLOTS,)),
        ("reserve", "<u4", (4,)),
        ("crc", "<u4"),
    ],
    align=True,
)
IMU_LAYOUT = np.dtype(
    [
        ("quaternion", "<f4", (4,)),
        ("gyroscope", "<f4", (3,)),
        ("accelerometer", "<f4", (3,)),
        ("rpy", "<f4", (3,)),
        ("temperature", "<i2"),
    ],
    align=True,
)
MOTOR_STATE_LAYOUT = np.dtype(
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
        ("imu_state", IMU_LAYOUT),
        ("motor_state", MOTOR_STATE_LAYOUT, (NUM_SLOTS,)),
        ("wireless_remote", "u1", (40,)),
        ("reserve", "<u4", (4,)),
        ("crc", "<u4"),
    ],
    align=True,
)


def field_of(layout: np.dtype, name: str) -> tuple[np.dtype, int]:
    """``(dtype, byte offset)`` of one field of a structured layout."""
    fields = layout.fields
    if fields is None or name not in fields:
        raise KeyError(f"{layout} has no field {name!r}")
    dtype, offset = fields[name][:2]
    return dtype, offset


def field_offset(layout: np.dtype, path: str) -> int:
    """Byte offset of a nested field (``"imu_state.gyroscope"``) in a structured layout."""
    offset = 0
    for name in path.split("."):
        layout, at = field_of(layout, name)
        offset += at
    return offset


def record_bytes(record: np.ndarray) -> np.ndarray:
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
        self._slots = field_offset(layout, slots_field)
        self._preceding_end = preceding_end
        self._gap = bytes(self._slots - preceding_end - 1)
        self.cdr_size = len(self.CDR_HEADER) + layout.itemsize - 4

    def to_cdr(self, record: np.ndarray) -> bytes:
        """XCDR1 sample (with encapsulation header) of a C-layout record."""
        c = record_bytes(record).data  # a memoryview of the record, no copy
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
