"""A rosbag2 bag (directory + ``metadata.yaml``) of MCAP files, written with the ``mcap`` package.

rosbags 0.11.9's ``Writer`` does write MCAP storage, but one file per bag, with chunks closed
only at 1 MiB and no way to flush: a recorder killed mid-session would lose up to a chunk of
data in an unreadable tail. Here every :meth:`BagWriter.flush` closes the current chunk and
flushes (and optionally fsyncs) the file, and the bag can be split into several files; the
files and ``metadata.yaml`` follow the layout rosbag2's MCAP storage plugin writes, so
``rosbags`` (and ``ros2 bag``) read the bag and any MCAP reader reads each file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from mcap.writer import CompressionType, Writer

from asap_ros import __version__
from asap_ros.core.errors import AsapError
from asap_ros.recording.metadata import FileStats, TopicStats, qos_profiles, qos_text, write_metadata
from asap_ros.recording.topics import RecordedTopic
from asap_ros.recording.typestore import schema_of

COMPRESSIONS = {"zstd": CompressionType.ZSTD, "lz4": CompressionType.LZ4, "none": CompressionType.NONE}
SESSION_METADATA = "asap_session"
"""Name of the MCAP metadata record holding the bag's ``custom_data`` (first and last record of
each file), so a bag whose ``metadata.yaml`` was never written can be repaired with it."""
CHUNK_SIZE = 8 << 20
"""Chunks normally close at :meth:`BagWriter.flush`; this bounds a chunk between flushes."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class McapFile:
    """One MCAP file (``ros2`` profile) with a schema and a channel per topic."""

    def __init__(
        self, path: Path, topics: Sequence[RecordedTopic], compression: str, custom_data: Mapping[str, str]
    ) -> None:
        self.path = path
        self._stream = path.open("xb")
        self._writer = Writer(self._stream, chunk_size=CHUNK_SIZE, compression=COMPRESSIONS[compression])
        self._writer.start(profile="ros2", library=f"asap_ros {__version__}")
        schema_ids: dict[str, int] = {}
        self._channels: dict[str, int] = {}
        for topic in topics:
            text, type_hash = schema_of(topic.msgtype)
            if topic.msgtype not in schema_ids:
                schema_ids[topic.msgtype] = self._writer.register_schema(topic.msgtype, "ros2msg", text.encode())
            self._channels[topic.name] = self._writer.register_channel(
                topic.name,
                "cdr",
                schema_ids[topic.msgtype],
                {"offered_qos_profiles": qos_text(qos_profiles(topic.latched)), "topic_type_hash": type_hash},
            )
        self.record_session(custom_data)
        self.start_ns = 0
        self.end_ns = 0
        self.message_count = 0

    def record_session(self, custom_data: Mapping[str, str]) -> None:
        """Add an ``asap_session`` metadata record (the last one is the current description)."""
        self._writer.add_metadata(SESSION_METADATA, dict(custom_data))

    def write(self, topic: str, log_time_ns: int, data: bytes, publish_time_ns: int) -> None:
        channel = self._channels.get(topic)
        if channel is None:
            raise AsapError(f"{self.path}: topic {topic!r} is not one of this bag's topics ({', '.join(self._channels)})")
        self._writer.add_message(channel, log_time_ns, data, publish_time_ns or log_time_ns)
        if not self.message_count or log_time_ns < self.start_ns:
            self.start_ns = log_time_ns
        self.end_ns = max(self.end_ns, log_time_ns)
        self.message_count += 1

    @property
    def size(self) -> int:
        return self._stream.tell()

    def flush(self, fsync: bool) -> None:
        """Close the current chunk and hand everything to the OS (and the disk if ``fsync``)."""
        self._writer.flush()
        if fsync:
            os.fsync(self._stream.fileno())

    def finish(self, custom_data: Mapping[str, str]) -> FileStats:
        """Write the summary and footer, fsync and close."""
        self.record_session(custom_data)
        self._writer.finish()
        self._stream.flush()
        os.fsync(self._stream.fileno())
        self._stream.close()
        return FileStats(self.path.name, self.start_ns, self.end_ns, self.message_count)

    def abandon(self) -> None:
        """Close without a summary (after a write error): the file stays repairable."""
        with suppress(OSError):  # the disk already failed; what reached it is what repair recovers
            self._stream.close()


@dataclass(frozen=True)
class SplitPolicy:
    """When to start the next file of a bag (checked at each flush); 0 disables a limit."""

    max_bytes: int = 0
    max_duration_ns: int = 0


@dataclass(frozen=True)
class BagSummary:
    """What a closed bag holds."""

    path: Path
    files: tuple[FileStats, ...]
    topic_counts: dict[str, int]


class BagWriter:
    """Writes a rosbag2 bag of MCAP files; not thread-safe (one writer thread)."""

    def __init__(
        self,
        path: str | Path,
        topics: Sequence[RecordedTopic],
        *,
        compression: str = "zstd",
        split: SplitPolicy = SplitPolicy(),
        fsync: bool = True,
        custom_data: Mapping[str, str] | None = None,
    ) -> None:
        self.path = Path(path)
        if compression not in COMPRESSIONS:
            raise AsapError(f"bag compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}")
        if self.path.exists():
            raise AsapError(f"bag {self.path} exists already; not overwriting it")
        self.path.mkdir(parents=True)
        self.topics = tuple(topics)
        self.custom_data: dict[str, str] = dict(custom_data or {})
        self._compression = compression
        self._split = split
        self._fsync = fsync
        self._files: list[FileStats] = []
        self._counts = {t.name: 0 for t in self.topics}
        self._types = {t.name: t.msgtype for t in self.topics}
        self._current: McapFile | None = None
        self._open_next_file()

    def _open_next_file(self) -> None:
        name = f"{self.path.name}_{len(self._files)}.mcap"
        self._current = McapFile(self.path / name, self.topics, self._compression, self.custom_data)
        _fsync_dir(self.path)

    def _file(self) -> McapFile:
        if self._current is None:
            raise AsapError(f"bag {self.path} is closed")
        return self._current

    def write(self, topic: str, log_time_ns: int, data: bytes, publish_time_ns: int = 0) -> None:
        """Add one serialised (CDR) message; ``log_time_ns`` is its receive time."""
        self._file().write(topic, log_time_ns, data, publish_time_ns)
        self._counts[topic] += 1

    def msgtype(self, topic: str) -> str:
        return self._types[topic]

    def update_custom_data(self, values: Mapping[str, str]) -> None:
        """Merge into ``custom_data`` and record it in the current file right away."""
        self.custom_data.update(values)
        self._file().record_session(self.custom_data)

    @property
    def bytes_written(self) -> int:
        """Size of the closed files plus the current one so far."""
        closed = sum((self.path / f.name).stat().st_size for f in self._files)
        return closed + (self._current.size if self._current else 0)

    def flush(self) -> None:
        """Make everything written so far durable; start the next file if the split policy says so."""
        current = self._file()
        current.flush(self._fsync)
        duration = current.end_ns - current.start_ns
        if current.message_count and (
            (self._split.max_bytes and current.size >= self._split.max_bytes)
            or (self._split.max_duration_ns and duration >= self._split.max_duration_ns)
        ):
            self._files.append(current.finish(self.custom_data))
            self._open_next_file()

    def close(self) -> BagSummary:
        """Finish the current file and write ``metadata.yaml``."""
        self._files.append(self._file().finish(self.custom_data))
        self._current = None
        topics = [
            TopicStats(t.name, t.msgtype, schema_of(t.msgtype)[1], self._counts[t.name], qos_profiles(t.latched))
            for t in self.topics
        ]
        write_metadata(self.path, self._files, topics, self.custom_data)
        _fsync_dir(self.path)
        return BagSummary(self.path, tuple(self._files), dict(self._counts))

    def abandon(self) -> None:
        """Stop without finishing (the disk failed): the bag is left for ``asap-ros bag repair``."""
        if self._current is not None:
            self._current.abandon()
            self._current = None
