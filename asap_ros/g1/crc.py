"""The hg CRC: the SDK's (``unitree_sdk2py.utils.crc.CRC``), computed in C.

The message is laid out as the C struct (little-endian, natural alignment, zero padding), read
as 32-bit words (all but the final ``crc`` word) and fed most significant bit first through
CRC-32 polynomial 0x04C11DB7, initial value 0xFFFFFFFF, no reflection, no final XOR. That equals
``zlib.crc32`` over the same words bit-reversed, complemented and bit-reversed back, which runs
in C here instead of the SDK's per-word Python loop (equality with the SDK is tested).
"""

from __future__ import annotations

import array
import sys
import zlib

import numpy as np

from asap_ros.g1.layout import record_bytes

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


def record_crc(record: np.ndarray) -> int:
    """CRC of a C-layout record (its own ``crc`` field excluded)."""
    return hg_crc32(record_bytes(record))
