"""``asap-ros bag info``: what a session bag holds and how well it is synchronised.

Per topic: count, rate, the largest gap between consecutive messages (receive time). Episodes
from the recorded mode transitions (the same rules as the recorder's ``/asap/episode``, so a
bag cut by a crash still shows its last episode, as incomplete). Sync quality over the policy
steps: how old the LowState and the mocap sample a step used were when its LowCmd was written,
and the step latency, as percentiles.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from asap_ros.core.errors import AsapError
from asap_ros.recording import topics as T
from asap_ros.recording.episodes import Episode, EpisodeTracker
from asap_ros.recording.metadata import read_metadata
from asap_ros.recording.typestore import bag_typestore

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class TopicInfo:
    name: str
    msgtype: str
    count: int
    rate_hz: float
    max_gap_ms: float
    max_gap_at_s: float
    """Where the largest gap starts, seconds from the bag start."""


@dataclass(frozen=True)
class Spread:
    """Percentiles of one quantity in milliseconds."""

    count: int
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of_ns(cls, values_ns: list[int]) -> Spread | None:
        if not values_ns:
            return None
        ms = np.asarray(values_ns, dtype=np.float64) / 1e6
        p50, p90, p99 = (float(v) for v in np.percentile(ms, PERCENTILES))
        return cls(len(ms), p50, p90, p99, float(ms.max()))

    def text(self) -> str:
        return f"p50 {self.p50:8.3f}  p90 {self.p90:8.3f}  p99 {self.p99:8.3f}  max {self.max:8.3f}"


@dataclass(frozen=True)
class SyncInfo:
    policy_steps: int
    lowstate_age_ms: Spread | None
    """Step stamp (LowCmd written) minus arrival of the LowState it used."""
    mocap_age_ms: Spread | None
    """Step stamp minus stamp of the newest mocap sample, over steps that had one."""
    steps_without_mocap: int
    latency_ms: Spread | None
    late_steps: int


@dataclass
class BagInfo:
    path: Path
    files: list[str]
    start_ns: int
    end_ns: int
    message_count: int
    custom_data: dict[str, str]
    topics: list[TopicInfo]
    episodes: list[Episode]
    sync: SyncInfo
    episode_messages: int = 0
    """``/asap/episode`` messages the recorder wrote (an episode cut by a crash has none)."""
    fault_ticks: list[int] | None = None
    """Control ticks of the policy steps on which DAMPING latched; ``None``: the bag's PolicyStep
    has no ``fault_latched`` field (recorded by an older version)."""

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    def to_dict(self) -> dict:
        data = asdict(self)
        data["path"] = str(self.path)
        data["duration_s"] = self.duration_s
        data["episodes"] = [{**asdict(e), "duration_s": e.duration_s} for e in self.episodes]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        start = datetime.datetime.fromtimestamp(self.start_ns / 1e9, datetime.timezone.utc)
        lines = [
            f"bag:       {self.path}",
            f"files:     {len(self.files)} ({', '.join(self.files)})",
            f"start:     {start.isoformat(timespec='milliseconds')}",
            f"duration:  {self.duration_s:.3f} s",
            f"messages:  {self.message_count}",
        ]
        lines += self._session_lines()
        width = max([len(t.name) for t in self.topics] + [5])
        type_width = max([len(t.msgtype) for t in self.topics] + [4])
        lines.append(f"{'topic':<{width}}  {'type':<{type_width}}  {'count':>8}  {'rate Hz':>8}  largest gap ms (at s)")
        for t in self.topics:
            gap = f"{t.max_gap_ms:9.2f} ({t.max_gap_at_s:.2f})" if t.count > 1 else ""
            lines.append(f"{t.name:<{width}}  {t.msgtype:<{type_width}}  {t.count:>8}  {t.rate_hz:>8.1f}  {gap}")
        lines.append(f"episodes:  {len(self.episodes)}")
        for e in self.episodes:
            end = f"-> {e.end_mode} ({e.end_reason})" if e.complete else f"cut: {e.end_reason}"
            flag = "  E-STOP" if e.estop else ""
            offset = (e.start_ns - self.start_ns) / 1e9
            lines.append(f"  {e.index:>3} {e.motion:<16} at {offset:8.2f} s  {e.duration_s:7.2f} s  {end}{flag}")
        if self.fault_ticks is None:
            lines.append("damping latched at: not marked (PolicyStep without fault_latched, an older recording)")
        else:
            lines.append(f"damping latched at: {', '.join(f'control tick {t}' for t in self.fault_ticks) or '-'}")
        lines += self._sync_lines()
        return "\n".join(lines)

    def _session_lines(self) -> list[str]:
        data = self.custom_data
        if "asap_ros.version" not in data:
            return []
        policies = ", ".join(p["name"] for p in json.loads(data.get("asap_ros.policies", "[]")))
        robot = data.get("asap_ros.robot.version", "?")
        lines = [
            f"session:   asap_ros {data['asap_ros.version']} on {data.get('asap_ros.host', '?')}, "
            f"robot version {robot} (mode_machine {data.get('asap_ros.robot.mode_machine', '?')})",
            f"policies:  {policies or '-'}",
        ]
        if data.get("asap_ros.operator_notes"):
            lines.append(f"notes:     {data['asap_ros.operator_notes']}")
        if "asap_ros.repair" in data:
            lines.append("repaired:  yes (see custom_data asap_ros.repair)")
        return lines

    def _sync_lines(self) -> list[str]:
        s = self.sync
        lines = [f"sync over {s.policy_steps} policy steps (ms):"]
        for label, spread in (("LowState age", s.lowstate_age_ms), ("mocap age", s.mocap_age_ms),
                              ("step latency", s.latency_ms)):
            lines.append(f"  {label:<13} {spread.text() if spread else '-'}")
        lines.append(f"  steps without mocap: {s.steps_without_mocap}   late steps: {s.late_steps}")
        return lines


class _TopicTimes:
    def __init__(self) -> None:
        self.count = 0
        self.first = 0
        self.last = 0
        self.max_gap = 0
        self.max_gap_at = 0

    def add(self, stamp: int) -> None:
        if self.count and stamp - self.last > self.max_gap:
            self.max_gap, self.max_gap_at = stamp - self.last, self.last
        if not self.count:
            self.first = stamp
        self.last = stamp
        self.count += 1


def bag_info(bag: str | Path) -> BagInfo:
    """Read a closed bag completely; :class:`AsapError` names what is wrong with a broken one."""
    from rosbags.rosbag2 import Reader

    bag = Path(bag)
    metadata = read_metadata(bag)
    try:
        with Reader(bag) as reader:
            return _collect(bag, reader, metadata)
    except AsapError:
        raise
    except Exception as exc:  # noqa: BLE001 -- rosbags raises several types for damaged files
        raise AsapError(
            f"{bag}: cannot read the bag ({type(exc).__name__}: {exc}); "
            f"if its recorder died, recover it with `asap-ros bag repair {bag}`"
        ) from exc


def _collect(bag: Path, reader, metadata: dict) -> BagInfo:
    store = bag_typestore({c.msgtype: c.msgdef.data for c in reader.connections})  # older bags: their own layout
    times = {c.topic: _TopicTimes() for c in reader.connections}
    tracker = EpisodeTracker()
    episodes: list[Episode] = []
    lowstate_age, mocap_age, latency = [], [], []
    without_mocap = late = episode_messages = 0
    fault_ticks: list[int] | None = None if _lacks_field(store, T.POLICY_STEP, reader, "fault_latched") else []
    for connection, stamp, raw in reader.messages():
        times[connection.topic].add(stamp)
        if connection.topic == T.POLICY_STEP:
            step = store.deserialize_cdr(raw, connection.msgtype)
            lowstate_age.append(step.stamp_ns - step.lowstate_stamp_ns)
            latency.append(step.latency_ns)
            late += bool(step.late)
            if fault_ticks is not None and step.fault_latched:
                fault_ticks.append(int(step.control_tick))
            if step.mocap_stamp_ns:
                mocap_age.append(step.stamp_ns - step.mocap_stamp_ns)
            else:
                without_mocap += 1
        elif connection.topic == T.TRANSITION:
            msg = store.deserialize_cdr(raw, connection.msgtype)
            ended = tracker.on_transition(msg.stamp_ns, msg.from_mode, msg.to_mode, msg.reason, msg.motion)
            episodes += [ended] if ended else []
        elif connection.topic == T.EPISODE:
            episode_messages += 1
    counted = [t for t in times.values() if t.count]
    start = min((t.first for t in counted), default=0)
    end = max((t.last for t in counted), default=0)
    cut = tracker.cut(end, "the bag ends during the episode")
    episodes += [cut] if cut else []
    topics = []
    for connection in reader.connections:
        t = times[connection.topic]
        rate = (t.count - 1) / ((t.last - t.first) / 1e9) if t.count > 1 and t.last > t.first else 0.0
        topics.append(TopicInfo(connection.topic, connection.msgtype, t.count, rate,
                                t.max_gap / 1e6, (t.max_gap_at - start) / 1e9 if t.count > 1 else 0.0))
    sync = SyncInfo(len(latency), Spread.of_ns(lowstate_age), Spread.of_ns(mocap_age), without_mocap,
                    Spread.of_ns(latency), late)
    return BagInfo(
        path=bag,
        files=[str(f) for f in metadata["relative_file_paths"]],
        start_ns=start,
        end_ns=end,
        message_count=sum(t.count for t in times.values()),
        custom_data=dict(metadata.get("custom_data") or {}),
        topics=topics,
        episodes=episodes,
        sync=sync,
        episode_messages=episode_messages,
        fault_ticks=fault_ticks,
    )


def _lacks_field(store, topic: str, reader, name: str) -> bool:
    """The bag has ``topic`` and its recorded type has no field ``name`` (an older layout)."""
    msgtype = next((c.msgtype for c in reader.connections if c.topic == topic), None)
    return msgtype is not None and all(field != name for field, _ in store.fielddefs[msgtype][1])
