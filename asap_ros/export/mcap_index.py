"""Time-range reads of raw messages from the indexed MCAP files of a bag, without per-message Python.

The ``mcap`` package reads each file's summary (schemas, channels, chunk indexes). A read
decompresses each chunk overlapping the time range once (all wanted topics together) and
finds the wanted messages through the chunk's message indexes (log time, offset per
channel) with numpy; the messages stay in the decompressed buffers as
:class:`RawMessages` (offsets and lengths), which :mod:`asap_ros.export.cdr_columns`
decodes in bulk. Chunks without message indexes are walked record by record. A file
without a summary (its writer died) is refused: ``asap-ros bag repair`` indexes it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.export.cdr_columns import RawMessages

_RECORD_HEAD = struct.Struct("<BQ")
_RECORD_HEAD_SIZE = 9
_MESSAGE_HEAD = struct.Struct("<HIQ")  # channel id, sequence, log time (then publish time)
_MESSAGE_HEAD_SIZE = 2 + 4 + 8 + 8
_CHUNK_HEAD = struct.Struct("<QQQII")  # start, end, uncompressed size, crc, compression name length
_INDEX_HEAD = struct.Struct("<HI")  # channel id, byte length of the (log time, offset) pairs
OP_MESSAGE = 0x05


@dataclass(frozen=True)
class _Chunk:
    path: Path
    offset: int
    length: int
    index_length: int
    start_ns: int
    end_ns: int
    index_offsets: dict[int, int]
    """Channel id -> file offset of its message index record."""


@dataclass(frozen=True)
class TopicInfo:
    name: str
    msgtype: str
    definition: str = ""
    """The message definition the bag embeds for ``msgtype`` (its schema's ros2msg text)."""


class McapIndex:
    """The chunks, channels and types of a set of MCAP files (one bag)."""

    def __init__(self, files: Iterable[Path]):
        from mcap.exceptions import McapError
        from mcap.reader import make_reader

        self.chunks: list[_Chunk] = []
        self.topics: dict[str, TopicInfo] = {}
        self._channel_topic: dict[tuple[Path, int], str] = {}
        for path in files:
            try:
                with path.open("rb") as stream:
                    summary = make_reader(stream).get_summary()
            except (OSError, McapError, ValueError, struct.error) as exc:
                raise ConfigError(path, None, f"cannot read MCAP file: {exc}") from exc
            if summary is None or (summary.channels and not summary.chunk_indexes):
                raise ConfigError(path, None, "MCAP file has no index (its writer did not close it); "
                                              "run `asap-ros bag repair` first")  # fmt: skip
            for channel_id, channel in summary.channels.items():
                schema = summary.schemas.get(channel.schema_id)
                info = TopicInfo(channel.topic, schema.name if schema else "", schema.data.decode() if schema else "")
                known = self.topics.setdefault(channel.topic, info)
                if known != info:
                    raise ConfigError(path, channel.topic, "the bag's files record this topic with different types "
                                      f"or definitions ({known.msgtype} and {info.msgtype})")  # fmt: skip
                self._channel_topic[(path, channel_id)] = channel.topic
            self.chunks += [
                _Chunk(path, c.chunk_start_offset, c.chunk_length, c.message_index_length, c.message_start_time,
                       c.message_end_time, dict(c.message_index_offsets))  # fmt: skip
                for c in summary.chunk_indexes
            ]
        self.chunks.sort(key=lambda c: c.start_ns)

    def definitions(self) -> dict[str, str]:
        """``{msgtype: embedded definition}`` of every recorded type."""
        return {t.msgtype: t.definition for t in self.topics.values() if t.msgtype}

    @property
    def end_ns(self) -> int:
        return max((c.end_ns for c in self.chunks), default=0)

    def read(self, topics: Iterable[str], start_ns: int | None = None, stop_ns: int | None = None
             ) -> dict[str, tuple[np.ndarray, RawMessages]]:  # fmt: skip
        """``{topic: (log times, messages)}`` with ``start_ns <= log time < stop_ns``, sorted by time."""
        wanted = set(topics)
        lo = -(1 << 63) if start_ns is None else start_ns
        hi = (1 << 63) - 1 if stop_ns is None else stop_ns
        parts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {t: [] for t in wanted}
        buffers: list[np.ndarray] = []
        base = 0
        streams: dict[Path, object] = {}
        try:
            for chunk in self.chunks:
                if chunk.end_ns < lo or chunk.start_ns >= hi:
                    continue
                channels = {c: self._channel_topic[(chunk.path, c)] for c in chunk.index_offsets
                            if self._channel_topic.get((chunk.path, c)) in wanted}  # fmt: skip
                if not channels and chunk.index_offsets:
                    continue
                if not chunk.index_offsets:  # no message indexes: every channel may be in it
                    channels = {c: t for (p, c), t in self._channel_topic.items() if p == chunk.path and t in wanted}
                stream = streams.get(chunk.path) or streams.setdefault(chunk.path, chunk.path.open("rb"))
                raw, found = _read_chunk(stream, chunk, channels, lo, hi)
                for topic, (times, starts, lengths) in found.items():
                    parts[topic].append((times, starts + base, lengths))
                buffers.append(raw)
                base += len(raw)
        finally:
            for stream in streams.values():
                stream.close()
        buffer = np.concatenate(buffers) if buffers else np.zeros(0, dtype=np.uint8)
        out = {}
        for topic, pieces in parts.items():
            times, starts, lengths = (np.concatenate([p[i] for p in pieces]) if pieces else np.zeros(0, np.int64)
                                      for i in range(3))  # fmt: skip
            order = np.argsort(times, kind="stable")
            out[topic] = (times[order], RawMessages(buffer, starts[order], lengths[order]))
        return out


def _decompress(path: Path, compression: str, data: bytes, size: int) -> bytes:
    if compression == "":
        return data
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
    if compression == "lz4":
        import lz4.frame

        return lz4.frame.decompress(data)
    raise ConfigError(path, None, "unsupported MCAP chunk compression", compression)


def _read_chunk(stream, chunk: _Chunk, channels: dict[int, str], lo: int, hi: int
                ) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]:  # fmt: skip
    """The decompressed records of one chunk and, per topic, (log times, message starts, lengths)."""
    stream.seek(chunk.offset)
    blob = stream.read(chunk.length + chunk.index_length)
    _, _, size, _, name_length = _CHUNK_HEAD.unpack_from(blob, _RECORD_HEAD_SIZE)
    pos = _RECORD_HEAD_SIZE + _CHUNK_HEAD.size
    compression = blob[pos : pos + name_length].decode()
    pos += name_length
    (records_length,) = struct.unpack_from("<Q", blob, pos)
    pos += 8
    raw = np.frombuffer(_decompress(chunk.path, compression, blob[pos : pos + records_length], size), dtype=np.uint8)
    located = _from_message_indexes(blob, chunk, channels) if chunk.index_offsets else _by_walking(raw, channels)
    found = {}
    for topic, (times, offsets) in located.items():
        keep = (times >= lo) & (times < hi)
        times, offsets = times[keep], offsets[keep]
        record_length = raw[(offsets + 1)[:, None] + np.arange(8)].view("<u8").ravel().astype(np.int64)
        header = _RECORD_HEAD_SIZE + _MESSAGE_HEAD_SIZE
        found[topic] = (times, offsets + header, record_length - _MESSAGE_HEAD_SIZE)
    return raw, found


def _from_message_indexes(blob: bytes, chunk: _Chunk, channels: dict[int, str]) -> dict[str, tuple[np.ndarray, ...]]:
    out: dict[str, list[np.ndarray]] = {}
    for channel, topic in channels.items():
        at = chunk.index_offsets[channel] - chunk.offset + _RECORD_HEAD_SIZE
        _, byte_length = _INDEX_HEAD.unpack_from(blob, at)
        pairs = np.frombuffer(blob, dtype="<u8", count=byte_length // 8, offset=at + _INDEX_HEAD.size).reshape(-1, 2)
        out.setdefault(topic, []).append(pairs.astype(np.int64))
    return {topic: (np.concatenate(p)[:, 0], np.concatenate(p)[:, 1]) for topic, p in out.items()}


def _by_walking(raw: np.ndarray, channels: dict[int, str]) -> dict[str, tuple[np.ndarray, ...]]:
    data = raw.tobytes()
    found: dict[str, tuple[list[int], list[int]]] = {t: ([], []) for t in channels.values()}
    pos, end = 0, len(data)
    while pos < end:
        opcode, length = _RECORD_HEAD.unpack_from(data, pos)
        if opcode == OP_MESSAGE:
            channel, _, log_time = _MESSAGE_HEAD.unpack_from(data, pos + _RECORD_HEAD_SIZE)
            topic = channels.get(channel)
            if topic is not None:
                found[topic][0].append(log_time)
                found[topic][1].append(pos)
        pos += _RECORD_HEAD_SIZE + length
    return {t: (np.array(times, np.int64), np.array(offsets, np.int64)) for t, (times, offsets) in found.items()}
