"""G1 wireless remote decoding against byte patterns of unitree_sdk2's xRockerBtnDataStruct."""

from __future__ import annotations

import struct

import pytest

from asap_ros.core.errors import ConfigError
from asap_ros.core.remote import (
    BUTTON_BITS,
    ComboDetector,
    RemoteState,
    decode_remote,
    encode_remote,
    parse_combo,
)


def raw_remote(byte2: int, byte3: int, lx=0.0, rx=0.0, ry=0.0, l2=0.0, ly=0.0) -> bytes:
    """Bytes laid out as the SDK struct: head[2], btn (uint16), 5 floats, idle[16]."""
    return bytes([0x55, 0x51, byte2, byte3]) + struct.pack("<5f", lx, rx, ry, l2, ly) + bytes(16)


def test_buttons_follow_sdk_bit_layout():
    # byte 2: R1 L1 start select R2 L2 F1 F2 (bit 0 first); byte 3: A B X Y up right down left
    assert decode_remote(raw_remote(0x01, 0)).buttons == {"R1"}
    assert decode_remote(raw_remote(0x20, 0)).buttons == {"L2"}
    assert decode_remote(raw_remote(0x08, 0)).buttons == {"select"}
    assert decode_remote(raw_remote(0, 0x02)).buttons == {"B"}
    assert decode_remote(raw_remote(0, 0x80)).buttons == {"left"}
    assert decode_remote(raw_remote(0x22, 0x02)).buttons == {"L1", "L2", "B"}
    assert decode_remote(raw_remote(0, 0)).buttons == frozenset()


def test_sticks_are_decoded_from_their_offsets():
    state = decode_remote(raw_remote(0, 0, lx=0.25, rx=-0.5, ry=0.75, l2=1.0, ly=-1.0))
    assert (state.lx, state.rx, state.ry, state.l2, state.ly) == (0.25, -0.5, 0.75, 1.0, -1.0)


def test_encode_is_the_inverse_of_decode():
    for name in BUTTON_BITS:
        state = RemoteState(frozenset({name, "A"}), lx=0.5, ly=-0.25)
        assert decode_remote(encode_remote(state)) == state
    assert encode_remote(RemoteState(frozenset({"L2", "B"})))[2:4] == bytes([0x20, 0x02])


def test_wrong_length_is_refused():
    with pytest.raises(ValueError, match="40 bytes, got 39"):
        decode_remote(bytes(39))


def test_parse_combo_and_its_errors():
    assert parse_combo("L2+B") == {"L2", "B"}
    assert parse_combo(" select + start ") == {"select", "start"}
    with pytest.raises(ConfigError, match="unknown button 'Z'.*'L2\\+Z'"):
        parse_combo("L2+Z", "supervisor.yaml")
    for bad in ("", "L2+", "+"):
        with pytest.raises(ConfigError, match="e.g. 'L2\\+B'"):
            parse_combo(bad)


def test_combo_fires_once_per_press_and_needs_every_button():
    detector = ComboDetector(parse_combo("L2+B"))
    held = decode_remote(raw_remote(0x20, 0x02))
    held_plus_other = decode_remote(raw_remote(0x21, 0x02))
    only_l2 = decode_remote(raw_remote(0x20, 0))
    fired = [detector.update(s) for s in (only_l2, held, held, held_plus_other, only_l2, held)]
    assert fired == [False, True, False, False, False, True]
