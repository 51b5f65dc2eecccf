"""Reading every intact record of an MCAP file, including one whose writer was killed.

A file cut off mid-write has no summary or footer and usually ends inside a record; a
damaged chunk fails its CRC or decompression. :class:`McapScan` yields the schemas, channels,
messages and metadata of the data section in file order, skips damaged chunks (recording
their time range) and stops at the first unreadable record, reporting where valid data ends.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mcap.exceptions import EndOfFile, McapError
from mcap.records import Channel, Chunk, DataEnd, Footer, Header, McapRecord, Message, Metadata, Schema
from mcap.stream_reader import StreamReader, breakup_chunk

from asap_ros.core.errors import AsapError

RECORD_SIZE_LIMIT = 1 << 30
"""A length field beyond this is treated as damage, not as a record to allocate."""
_READ_ERRORS = (McapError, struct.error, ValueError, UnicodeDecodeError, MemoryError)


class BagDamaged(AsapError):
    """A file is not a readable MCAP (bad magic, wrong profile): there is nothing to recover."""


@dataclass
class ScanReport:
    """What a scan found in one file."""

    path: Path
    size: int
    complete: bool = False
    """The file ends with a valid summary and footer (its writer closed it)."""
    valid_end: int = 0
    """Offset just past the last intact record of the data section."""
    lost_chunks: list[tuple[int, int]] = field(default_factory=list)
    """``(start_ns, end_ns)`` of chunks skipped because their data was damaged."""
    stopped_by: str = ""
    """Why reading stopped before a footer ('' for a complete file)."""

    @property
    def discarded_bytes(self) -> int:
        return 0 if self.complete else self.size - self.valid_end

    @property
    def intact(self) -> bool:
        return self.complete and not self.lost_chunks


class McapScan:
    """``records()`` yields the data-section records; ``report`` is final once it is exhausted."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.report = ScanReport(self.path, self.path.stat().st_size)
        except OSError as exc:
            raise BagDamaged(f"{self.path}: cannot read: {exc.strerror or exc}") from exc

    def records(self) -> Iterator[Schema | Channel | Message | Metadata]:
        report = self.report
        with self.path.open("rb") as stream:
            reader = StreamReader(stream, emit_chunks=True, record_size_limit=RECORD_SIZE_LIMIT).records
            header = self._first_record(reader)
            if header is None:
                report.stopped_by = "file ends before its header (killed right after creating it)"
                return
            if not isinstance(header, Header) or header.profile != "ros2":
                raise BagDamaged(f"{self.path}: not a ROS 2 MCAP file (profile {getattr(header, 'profile', None)!r})")
            report.valid_end = stream.tell()
            in_data = True
            try:
                for record in reader:
                    if isinstance(record, Footer):
                        report.complete = True
                        break
                    if isinstance(record, DataEnd):
                        in_data = False
                    if not in_data:
                        continue
                    if isinstance(record, Chunk):
                        yield from self._chunk_records(record)
                    elif isinstance(record, (Schema, Channel, Message, Metadata)):
                        yield record
                    report.valid_end = stream.tell()
            except _READ_ERRORS as exc:
                report.stopped_by = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if not report.complete and not report.stopped_by:
            report.stopped_by = "no footer"

    def _first_record(self, reader: Iterator[McapRecord]) -> McapRecord | None:
        """The header record; ``None`` if the file ends first; BagDamaged if it is no MCAP."""
        try:
            return next(reader)
        except EndOfFile:
            return None
        except (StopIteration, *_READ_ERRORS) as exc:
            raise BagDamaged(f"{self.path}: not an MCAP file ({type(exc).__name__}: {exc})") from exc

    def _chunk_records(self, chunk: Chunk) -> list[McapRecord]:
        try:
            return [r for r in breakup_chunk(chunk, validate_crc=True) if isinstance(r, (Schema, Channel, Message))]
        except Exception:  # noqa: BLE001 -- any failure to decode the chunk means its data is damaged
            self.report.lost_chunks.append((chunk.message_start_time, chunk.message_end_time))
            return []
