"""Vectorised decoding of many CDR messages of one type into numpy columns.

Decoding a ``unitree_hg/msg/LowState`` message by message takes ~160 µs in Python; an hour
of 500 Hz robot state is 1.8 million of them. Messages of one topic almost always share one
byte layout (fixed-size types, or strings/sequences of constant length such as a header's
``frame_id``), so the layout is computed once from a prototype message (XCDR1: every
primitive aligned to its size, relative to the payload after the 4-byte encapsulation
header) and every field is then gathered for all messages at once with numpy.

Messages whose length or string/sequence length prefixes differ from the prototype's get a
layout of their own: the result is exact for any mix of layouts, only slower.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from rosbags.typesys.base import Nodetype

HEADER_SIZE = 4
PRIMITIVE_DTYPES: dict[str, str] = {
    "bool": "?", "byte": "u1", "char": "u1", "octet": "u1", "int8": "i1", "uint8": "u1",
    "int16": "i2", "uint16": "u2", "int32": "i4", "uint32": "u4", "int64": "i8", "uint64": "u8",
    "float32": "f4", "float64": "f8", "float": "f4", "double": "f8",
}  # fmt: skip


class RawMessages:
    """Serialised messages held in one byte buffer: message ``i`` is ``buffer[starts[i]:starts[i] + lengths[i]]``."""

    def __init__(self, buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray):
        self.buffer = buffer
        self.starts = np.asarray(starts, dtype=np.int64)
        self.lengths = np.asarray(lengths, dtype=np.int64)

    @classmethod
    def from_bytes(cls, messages: Sequence[bytes]) -> RawMessages:
        lengths = np.fromiter(map(len, messages), dtype=np.int64, count=len(messages))
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(messages) else np.zeros(0, np.int64)
        return cls(np.frombuffer(b"".join(messages), dtype=np.uint8), starts, lengths)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> bytes:
        return self.buffer[self.starts[i] : self.starts[i] + self.lengths[i]].tobytes()

    def take(self, rows: np.ndarray) -> RawMessages:
        return RawMessages(self.buffer, self.starts[rows], self.lengths[rows])

    def rows(self, indices: np.ndarray, size: int) -> np.ndarray:
        """(n, size) byte matrix of messages ``indices`` (all of length ``size``)."""
        view = memoryview(self.buffer)
        joined = b"".join([view[start : start + size] for start in self.starts[indices].tolist()])
        return np.frombuffer(joined, dtype=np.uint8).reshape(-1, size)


@dataclass
class _Leaf:
    """One primitive or string field of the message (all its occurrences)."""

    dtype: str
    offsets: list[int] = field(default_factory=list)
    shape: tuple[int, ...] = ()
    string_lengths: list[int] = field(default_factory=list)


@dataclass
class _Layout:
    """Byte positions of every field of one message shape."""

    size: int
    little_endian: bool
    leaves: dict[str, _Leaf]
    prefix_offsets: list[int]
    """Positions of the uint32 string/sequence length prefixes (and the encapsulation header)."""


class _LayoutWalker:
    """Walks a prototype message along its type definition, recording where each field lies."""

    def __init__(self, typestore, data: bytes):
        self.typestore = typestore
        self.data = data
        self.little = data[1] == 1
        self.pos = HEADER_SIZE
        self.leaves: dict[str, _Leaf] = {}
        self.prefixes: list[int] = [0]

    def _align(self, size: int) -> None:
        payload = self.pos - HEADER_SIZE
        self.pos += -payload % size

    def _uint32(self) -> int:
        self._align(4)
        self.prefixes.append(self.pos)
        value = struct.unpack_from("<I" if self.little else ">I", self.data, self.pos)[0]
        self.pos += 4
        return value

    def _leaf(self, path: str, dtype: str, shape: tuple[int, ...]) -> _Leaf:
        leaf = self.leaves.get(path)
        if leaf is None:
            leaf = self.leaves[path] = _Leaf(dtype=dtype, shape=shape)
        return leaf

    def message(self, msgtype: str, path: str, shape: tuple[int, ...]) -> None:
        for name, desc in self.typestore.fielddefs[msgtype][1]:
            self.field(desc, f"{path}{name}", shape)

    def field(self, desc: tuple, path: str, shape: tuple[int, ...]) -> None:
        kind, detail = desc
        if kind == Nodetype.NAME:
            self.message(detail, f"{path}.", shape)
        elif kind == Nodetype.BASE:
            self.primitives(detail[0], path, shape, 1)
        else:
            subdesc, length = detail
            if kind == Nodetype.SEQUENCE:
                length = self._uint32()
            if subdesc[0] == Nodetype.BASE:
                self.primitives(subdesc[1][0], path, (*shape, length), length)
            else:
                for _ in range(length):
                    self.message(subdesc[1], f"{path}.", (*shape, length))

    def primitives(self, typename: str, path: str, shape: tuple[int, ...], count: int) -> None:
        if typename == "string":
            leaf = self._leaf(path, "string", shape)
            for _ in range(count):
                length = self._uint32()
                leaf.offsets.append(self.pos)
                leaf.string_lengths.append(max(length - 1, 0))
                self.pos += length
            return
        if typename not in PRIMITIVE_DTYPES:
            raise ValueError(f"CDR field {path!r}: unsupported type {typename!r}")
        dtype = np.dtype(PRIMITIVE_DTYPES[typename]).newbyteorder("<" if self.little else ">")
        leaf = self._leaf(path, dtype.str, shape)
        if count:
            self._align(dtype.itemsize)
        leaf.offsets.extend(range(self.pos, self.pos + count * dtype.itemsize, dtype.itemsize))
        self.pos += count * dtype.itemsize


def _layout(typestore, msgtype: str, data: bytes) -> _Layout:
    walker = _LayoutWalker(typestore, data)
    walker.message(msgtype, "", ())
    if walker.pos > len(data):
        raise ValueError(f"{msgtype} message of {len(data)} bytes is shorter than its layout ({walker.pos} bytes)")
    return _Layout(len(data), walker.little, walker.leaves, walker.prefixes)


def fields_of(typestore, msgtype: str, prototype: bytes) -> dict[str, tuple[int, ...]]:
    """Field paths (``motor_state.q``, ``header.stamp.sec`` ...) and their per-message shapes."""
    return {path: leaf.shape for path, leaf in _layout(typestore, msgtype, prototype).leaves.items()}


def _gather(buf: np.ndarray, leaf: _Leaf) -> np.ndarray:
    """Values of one leaf for every row of ``buf`` (rows = messages of one layout)."""
    rows = buf.shape[0]
    if leaf.dtype == "string":
        out = np.empty((rows, len(leaf.offsets)), dtype=object)
        for j, (offset, length) in enumerate(zip(leaf.offsets, leaf.string_lengths)):
            out[:, j] = [bytes(row).decode() for row in buf[:, offset : offset + length]]
        return out.reshape((rows, *leaf.shape))
    dtype = np.dtype(leaf.dtype)
    offsets = np.asarray(leaf.offsets, dtype=np.int64)
    steps = np.diff(offsets)
    if offsets.size and np.all(steps == (steps[0] if steps.size else dtype.itemsize)):
        stride = int(steps[0]) if steps.size else dtype.itemsize  # evenly spaced (struct arrays): a strided view
        start = buf[:, offsets[0] :]
        raw = np.lib.stride_tricks.as_strided(
            start, shape=(rows, offsets.size, dtype.itemsize), strides=(buf.strides[0], stride, 1), writeable=False
        ).reshape(rows, -1)
    else:
        raw = buf[:, (offsets[:, None] + np.arange(dtype.itemsize)).ravel()]
    values = np.ascontiguousarray(raw).view(dtype).astype(dtype.newbyteorder("="), copy=False)
    return values.reshape((rows, *leaf.shape))


def encode_columns(typestore, msgtype: str, prototype: bytes, columns: Mapping[str, np.ndarray]) -> list[bytes]:
    """``N`` CDR messages: ``prototype`` with the given fields replaced row by row.

    The inverse of :func:`decode_columns` for messages sharing the prototype's layout (string
    and sequence lengths are the prototype's): used to synthesise long recordings quickly.
    """
    layout = _layout(typestore, msgtype, prototype)
    rows = len(next(iter(columns.values()))) if columns else 0
    buf = np.tile(np.frombuffer(prototype, dtype=np.uint8), (rows, 1))
    for path, values in columns.items():
        leaf = layout.leaves.get(path)
        if leaf is None or leaf.dtype == "string":
            raise KeyError(f"{msgtype} has no numeric field {path!r}")
        dtype = np.dtype(leaf.dtype)
        raw = np.ascontiguousarray(np.asarray(values).astype(dtype).reshape(rows, -1)).view(np.uint8)
        if raw.shape[1] != len(leaf.offsets) * dtype.itemsize:
            raise ValueError(f"{msgtype}.{path}: expected {leaf.shape} per message, got {np.shape(values)[1:]}")
        buf[:, (np.asarray(leaf.offsets)[:, None] + np.arange(dtype.itemsize)).ravel()] = raw
    return [row.tobytes() for row in buf]


def decode_columns(
    typestore, msgtype: str, messages: RawMessages | Sequence[bytes], fields: Sequence[str]
) -> dict[str, np.ndarray]:
    """``{path: array (N, *shape)}`` of the requested fields of ``N`` raw CDR messages.

    Unknown field paths are a ``KeyError`` naming the path and the known ones; fields whose
    shape differs between messages (sequences of varying length) are a ``ValueError``.
    """
    if not isinstance(messages, RawMessages):
        messages = RawMessages.from_bytes(messages)
    count = len(messages)
    if not count:
        return {path: np.empty((0,)) for path in fields}
    out: dict[str, np.ndarray] = {}
    remaining = np.arange(count)
    while remaining.size:
        layout = _layout(typestore, msgtype, messages[remaining[0]])
        unknown = [f for f in fields if f not in layout.leaves]
        if unknown:
            raise KeyError(f"{msgtype} has no field {unknown[0]!r} (fields: {', '.join(layout.leaves)})")
        candidates = remaining[messages.lengths[remaining] == layout.size]
        buf = messages.rows(candidates, layout.size)
        prefix_columns = (np.asarray(layout.prefix_offsets)[:, None] + np.arange(4)).ravel()
        same = np.all(buf[:, prefix_columns] == buf[0, prefix_columns], axis=1)
        members, buf = candidates[same], buf[same]
        for path in fields:
            values = _gather(buf, layout.leaves[path])
            if path not in out:
                out[path] = np.empty((count, *values.shape[1:]), dtype=values.dtype)
            elif out[path].shape[1:] != values.shape[1:]:
                raise ValueError(
                    f"{msgtype}.{path}: shape varies between messages ({out[path].shape[1:]} and {values.shape[1:]})"
                )
            out[path][members] = values
        remaining = np.setdiff1d(remaining, members, assume_unique=True)
    return out
