"""Decoder of the G1 wireless remote, as carried in ``LowState_.wireless_remote`` (40 bytes).

Layout (unitree_sdk2 ``xRockerBtnDataStruct``, little-endian): bytes 0-1 header, bytes 2-3 a
16-bit button field (bit 0 = R1 ... bit 15 = left, see :data:`BUTTON_BITS`), then five
float32 axes ``lx, rx, ry, L2, ly`` at bytes 4, 8, 12, 16, 20; bytes 24-39 unused.

An e-stop is a *combo*: a set of buttons that are all held at once (``"L2+B"``).
:class:`ComboDetector` turns the stream of samples into one event per press.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from asap_ros.core.errors import ConfigError

REMOTE_SIZE = 40
BUTTON_BITS: dict[str, int] = {
    "R1": 0, "L1": 1, "start": 2, "select": 3, "R2": 4, "L2": 5, "F1": 6, "F2": 7,
    "A": 8, "B": 9, "X": 10, "Y": 11, "up": 12, "right": 13, "down": 14, "left": 15,
}
_AXES = struct.Struct("<5f")  # lx, rx, ry, L2 (analog), ly
_AXES_OFFSET = 4


@dataclass(frozen=True)
class RemoteState:
    """Buttons held and stick positions of one remote sample."""

    buttons: frozenset[str]
    lx: float = 0.0
    ly: float = 0.0
    rx: float = 0.0
    ry: float = 0.0
    l2: float = 0.0

    def holds(self, combo: Iterable[str]) -> bool:
        """True when every button of ``combo`` is held (other buttons may be held too)."""
        return self.buttons.issuperset(combo)


def decode_remote(data: bytes | Sequence[int]) -> RemoteState:
    """Decode the 40 ``wireless_remote`` bytes; any other length is a ``ValueError``."""
    raw = bytes(data)
    if len(raw) != REMOTE_SIZE:
        raise ValueError(f"wireless_remote must be {REMOTE_SIZE} bytes, got {len(raw)}")
    field = raw[2] | (raw[3] << 8)
    buttons = frozenset(name for name, bit in BUTTON_BITS.items() if field >> bit & 1)
    lx, rx, ry, l2, ly = _AXES.unpack_from(raw, _AXES_OFFSET)
    return RemoteState(buttons, lx=lx, ly=ly, rx=rx, ry=ry, l2=l2)


def encode_remote(state: RemoteState) -> bytes:
    """The 40 bytes a remote in ``state`` sends (inverse of :func:`decode_remote`)."""
    field = 0
    for name in state.buttons:
        field |= 1 << BUTTON_BITS[name]
    raw = bytearray(REMOTE_SIZE)
    raw[2], raw[3] = field & 0xFF, field >> 8
    _AXES.pack_into(raw, _AXES_OFFSET, state.lx, state.rx, state.ry, state.l2, state.ly)
    return bytes(raw)


def parse_combo(text: str, source: str = "<combo>", key: str = "estop_combo") -> frozenset[str]:
    """``"L2+B"`` -> ``{"L2", "B"}``; unknown or missing buttons are a :class:`ConfigError`."""
    names = [part.strip() for part in text.split("+")]
    if not text.strip() or any(not name for name in names):
        raise ConfigError(source, key, "must be buttons joined by '+', e.g. 'L2+B'", text)
    unknown = [name for name in names if name not in BUTTON_BITS]
    if unknown:
        raise ConfigError(
            source, key, f"unknown button {unknown[0]!r} (buttons: {', '.join(BUTTON_BITS)})", text
        )
    return frozenset(names)


class ComboDetector:
    """Fires once each time a combo becomes held (rising edge); releasing re-arms it."""

    def __init__(self, combo: frozenset[str]):
        if not combo:
            raise ValueError("a combo needs at least one button")
        self.combo = combo
        self._held = False

    @property
    def held(self) -> bool:
        """The combo was held in the newest sample."""
        return self._held

    def update(self, state: RemoteState) -> bool:
        """Feed one sample; True exactly on the sample where the combo starts being held."""
        held = state.holds(self.combo)
        fired = held and not self._held
        self._held = held
        return fired
