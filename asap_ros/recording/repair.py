"""``asap-ros bag repair``: a readable bag from one whose recorder died before closing it.

Every MCAP file is scanned (:mod:`.mcap_scan`). Intact files are copied byte for byte; a
damaged one (no footer after a ``kill -9``, a partial last record, a chunk failing its CRC)
is rewritten from its intact records with a fresh summary. ``metadata.yaml`` is rebuilt from
what the files hold, with the session description from their ``asap_session`` records and a
note of what was lost. The result is checked (rosbags opens it, each file's summary holds the
expected message count) before it is kept.

The original is never modified: the repaired bag goes to ``out``, or, in place, the original
is first copied to ``<bag>.orig`` (verified by SHA-256) and only then replaced.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml
from mcap.reader import SeekingReader
from mcap.records import Channel, Message, Metadata, Schema
from mcap.writer import CompressionType, Writer

from asap_ros import __version__
from asap_ros.config.policy_spec import sha256_of
from asap_ros.core.errors import AsapError
from asap_ros.recording.bag_writer import SESSION_METADATA
from asap_ros.recording.mcap_scan import BagDamaged, McapScan, ScanReport
from asap_ros.recording.metadata import FileStats, TopicStats, listed_files, write_metadata

_INDEX = re.compile(r"_(\d+)\.mcap$")


def mcap_files(bag: Path) -> list[Path]:
    """The bag's MCAP files in split order; :class:`BagDamaged` if there are none."""
    if not bag.is_dir():
        raise BagDamaged(f"{bag}: not a bag directory")
    files = sorted(bag.glob("*.mcap"), key=lambda p: (int(m.group(1)) if (m := _INDEX.search(p.name)) else -1, p.name))
    if not files:
        raise BagDamaged(f"{bag}: no .mcap files in it")
    return files


@dataclass
class FileSurvey:
    """One source file: scan report and what its intact records hold."""

    report: ScanReport
    topics: dict[int, tuple[str, str, str, str]] = field(default_factory=dict)
    """channel id -> (topic, message type, type hash, offered_qos_profiles YAML)."""
    counts: Counter = field(default_factory=Counter)
    start_ns: int = 0
    end_ns: int = 0
    session: dict[str, str] | None = None
    orphans: int = 0
    """Messages whose channel record was lost (cannot be written)."""

    @property
    def message_count(self) -> int:
        return sum(self.counts.values())


def survey(path: Path) -> FileSurvey:
    """Scan one file, counting its messages per channel."""
    scan = McapScan(path)
    found = FileSurvey(scan.report)
    schemas: dict[int, str] = {}
    for record in scan.records():
        if isinstance(record, Schema):
            schemas[record.id] = record.name
        elif isinstance(record, Channel):
            found.topics[record.id] = (
                record.topic, schemas.get(record.schema_id, ""), record.metadata.get("topic_type_hash", ""),
                record.metadata.get("offered_qos_profiles", "[]"),
            )
        elif isinstance(record, Message):
            if record.channel_id not in found.topics:
                found.orphans += 1
                continue
            if not found.message_count or record.log_time < found.start_ns:
                found.start_ns = record.log_time
            found.end_ns = max(found.end_ns, record.log_time)
            found.counts[record.channel_id] += 1
        elif isinstance(record, Metadata) and record.name == SESSION_METADATA:
            found.session = dict(record.metadata)
    return found


def rewrite(source: Path, target: Path) -> None:
    """Write the intact records of ``source`` into a new, complete MCAP file ``target``."""
    with target.open("xb") as stream:
        writer = Writer(stream, compression=CompressionType.ZSTD)
        writer.start(profile="ros2", library=f"asap_ros {__version__} bag repair")
        schema_ids: dict[int, int] = {}
        channel_ids: dict[int, int] = {}
        for record in McapScan(source).records():
            if isinstance(record, Schema) and record.id not in schema_ids:
                schema_ids[record.id] = writer.register_schema(record.name, record.encoding, record.data)
            elif isinstance(record, Channel) and record.id not in channel_ids:
                channel_ids[record.id] = writer.register_channel(
                    record.topic, record.message_encoding, schema_ids.get(record.schema_id, 0), record.metadata
                )
            elif isinstance(record, Message) and record.channel_id in channel_ids:
                writer.add_message(
                    channel_ids[record.channel_id], record.log_time, record.data, record.publish_time, record.sequence
                )
            elif isinstance(record, Metadata):
                writer.add_metadata(record.name, record.metadata)
        writer.finish()


@dataclass
class FileOutcome:
    name: str
    action: str
    """``copied`` (intact), ``rebuilt`` (damaged, rewritten) or ``dropped`` (no header: no data)."""
    messages: int
    discarded_bytes: int
    lost_chunks: list[tuple[int, int]]
    orphan_messages: int
    stopped_by: str


@dataclass
class RepairResult:
    source: Path
    output: Path | None
    """``None`` when the bag was intact and nothing was written."""
    files: list[FileOutcome]
    topic_counts: dict[str, int]
    backup: Path | None = None

    def describe(self) -> str:
        total = sum(self.topic_counts.values())
        if self.output is None:
            return f"{self.source}: intact ({total} messages in {len(self.files)} file(s)); nothing to repair"
        lines = [f"repaired {self.source} -> {self.output}: {total} messages"]
        for f in self.files:
            line = f"  {f.name}: {f.action}, {f.messages} messages"
            if f.action != "copied":
                line += f", {f.discarded_bytes} bytes of unfinished tail dropped ({f.stopped_by})"
            if f.lost_chunks:
                spans = ", ".join(f"{(b - a) / 1e9:.2f} s at {a}" for a, b in f.lost_chunks)
                line += f"; {len(f.lost_chunks)} damaged chunk(s) lost: {spans}"
            if f.orphan_messages:
                line += f"; {f.orphan_messages} messages without a channel record dropped"
            lines.append(line)
        if self.backup is not None:
            lines.append(f"  the original is kept, verified, at {self.backup}")
        return "\n".join(lines)


def _bag_is_intact(bag: Path, surveys: list[FileSurvey]) -> bool:
    try:
        listed = listed_files(bag)
    except AsapError:
        return False
    return listed == [s.report.path.name for s in surveys] and all(s.report.intact for s in surveys)


def _rebuild(source: Path, surveys: list[FileSurvey], output: Path) -> RepairResult:
    output.mkdir(parents=True)
    outcomes, stats = [], []
    topics: dict[str, tuple[str, str, str]] = {}
    topic_counts: Counter = Counter()
    for found in surveys:
        report = found.report
        name = report.path.name
        if not report.valid_end and not report.complete:
            outcomes.append(FileOutcome(name, "dropped", 0, report.size, [], 0, report.stopped_by))
            continue
        if report.intact and not found.orphans:
            shutil.copy2(report.path, output / name)
            action = "copied"
        else:
            rewrite(report.path, output / name)
            action = "rebuilt"
        outcomes.append(FileOutcome(name, action, found.message_count, report.discarded_bytes,
                                    report.lost_chunks, found.orphans, report.stopped_by))
        stats.append(FileStats(name, found.start_ns, found.end_ns, found.message_count))
        for channel_id, (topic, *description) in found.topics.items():
            topics.setdefault(topic, tuple(description))
            topic_counts[topic] += found.counts[channel_id]
    session = next((s.session for s in reversed(surveys) if s.session is not None), {})
    custom = dict(session)
    custom["asap_ros.repair"] = json.dumps(
        {"repaired_ns": time.time_ns(), "by": f"asap_ros {__version__}", "files": [asdict(o) for o in outcomes]}
    )
    listed = [TopicStats(t, m, h, topic_counts[t], yaml.safe_load(q) or []) for t, (m, h, q) in topics.items()]
    write_metadata(output, stats, listed, custom)
    return RepairResult(source, output, outcomes, dict(topic_counts))


def _verify(result: RepairResult) -> None:
    """rosbags opens the repaired bag and every file's summary holds the messages written."""
    from rosbags.rosbag2 import Reader

    output = result.output
    try:
        with Reader(output) as reader:
            counts = {c.topic: c.msgcount for c in reader.connections}
    except Exception as exc:  # noqa: BLE001 -- any reader failure means the repair did not work
        raise AsapError(f"repaired bag {output} does not open with rosbags: {exc}") from exc
    if counts != result.topic_counts:
        raise AsapError(f"repaired bag {output}: rosbags counts {counts} differ from {result.topic_counts}")
    for outcome in result.files:
        if outcome.action == "dropped":
            continue
        with (output / outcome.name).open("rb") as stream:
            summary = SeekingReader(stream).get_summary()
        found = summary.statistics.message_count if summary and summary.statistics else -1
        if found != outcome.messages:
            raise AsapError(f"repaired file {output / outcome.name} holds {found} messages, expected {outcome.messages}")


def sha256_tree(root: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every file under ``root``."""
    return {str(p.relative_to(root)): sha256_of(p) for p in sorted(root.rglob("*")) if p.is_file()}


def verified_copy(source: Path, target: Path) -> None:
    """Copy a directory and check every file's SHA-256 against the source."""
    shutil.copytree(source, target)
    if sha256_tree(source) != sha256_tree(target):
        raise AsapError(f"copy of {source} at {target} differs from the original")


def repair_bag(bag: str | Path, out: str | Path | None = None) -> RepairResult:
    """Repair ``bag`` into ``out`` (must not exist), or in place when ``out`` is ``None``."""
    bag = Path(bag)
    surveys = [survey(path) for path in mcap_files(bag)]
    if _bag_is_intact(bag, surveys):
        counts: Counter = Counter()
        for found in surveys:
            for channel_id, (topic, *_) in found.topics.items():
                counts[topic] += found.counts[channel_id]
        outcomes = [FileOutcome(s.report.path.name, "copied", s.message_count, 0, [], 0, "") for s in surveys]
        return RepairResult(bag, None, outcomes, dict(counts))
    if out is not None:
        return _repair_to(bag, surveys, Path(out))
    return _repair_in_place(bag)


def _repair_to(bag: Path, surveys: list[FileSurvey], out: Path) -> RepairResult:
    if out.exists():
        raise AsapError(f"{out} exists already; give --out a new path")
    try:
        result = _rebuild(bag, surveys, out)
        _verify(result)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return result


def _repair_in_place(bag: Path) -> RepairResult:
    backup = bag.with_name(bag.name + ".orig")
    staging = bag.with_name(bag.name + ".repairing")
    retired = bag.with_name(bag.name + ".replaced")
    for path in (backup, staging, retired):
        if path.exists():
            raise AsapError(f"{path} exists (left by an earlier repair?); move it away and retry")
    try:
        verified_copy(bag, backup)
        result = _repair_to(backup, [survey(path) for path in mcap_files(backup)], staging)
    except BaseException:
        shutil.rmtree(backup, ignore_errors=True)
        raise
    bag.rename(retired)  # the verified copy at `backup` already holds the original bytes
    try:
        staging.rename(bag)
    except OSError:
        retired.rename(bag)
        raise
    shutil.rmtree(retired)
    result.source, result.output, result.backup = bag, bag, backup
    return result

