"""The session recorder: every raw LowState/LowCmd, policy step, transition, mocap and
diagnostics message into one rosbag2 bag (MCAP files), with episodes marked in it.

Sources (the DDS reader thread, rclpy callbacks, or any caller of :meth:`Recorder.submit`)
only stamp and enqueue; one writer thread writes, closes a chunk and flushes the file every
``flush_period_s`` (at most 1 s), checks the free-space floor and splits files. A fault
(free space below the floor, a disk error) ends the recording cleanly and is reported through
``on_fault`` and on diagnostics; the recorder never talks to the controller.
"""

from __future__ import annotations

import enum
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from asap_ros.core.errors import AsapError
from asap_ros.recording import topics as T
from asap_ros.recording.bag_writer import BagSummary, BagWriter
from asap_ros.recording.config import RecorderConfig
from asap_ros.recording.disk_guard import DiskGuard
from asap_ros.recording.episodes import Episode, EpisodeTracker
from asap_ros.recording.robot_model import RobotModelTopics
from asap_ros.recording.session_info import SessionInfo
from asap_ros.recording.typestore import recording_typestore

_STOP = object()
_FAULT = object()


class RecorderState(enum.Enum):
    IDLE = "idle"
    RECORDING = "recording"
    STOPPED = "stopped"
    FAULT = "fault"


@dataclass(frozen=True)
class RecorderStatus:
    """A snapshot for diagnostics and callers."""

    state: RecorderState
    bag: Path | None
    fault: str | None
    message_counts: dict[str, int]
    bytes_written: int
    backlog: int
    discarded: int
    undecodable: int
    """Transitions/LowStates stored but not decodable for episodes and robot info."""
    episode: int | None
    host: str

    @property
    def diagnostic_level(self) -> int:
        """diagnostic_msgs level: 0 OK while recording or cleanly stopped, 2 ERROR on a fault."""
        return 2 if self.state is RecorderState.FAULT else 0

    @property
    def summary(self) -> str:
        if self.state is RecorderState.FAULT:
            return f"recording stopped: {self.fault}"
        total = sum(self.message_counts.values())
        return f"{self.state.value} {self.bag or ''}: {total} messages, {self.bytes_written / 1e6:.1f} MB"

    def key_values(self) -> dict[str, str]:
        values = {
            "state": self.state.value,
            "bag": str(self.bag or ""),
            "bytes_written": str(self.bytes_written),
            "backlog": str(self.backlog),
            "discarded_after_stop": str(self.discarded),
            "undecodable": str(self.undecodable),
            "episode": "" if self.episode is None else str(self.episode),
        }
        values.update({f"count {topic}": str(n) for topic, n in self.message_counts.items()})
        if self.fault:
            values["fault"] = self.fault
        return values


class Recorder:
    """Records one session into one bag; usable in-process or inside the ``asap_recorder`` node."""

    def __init__(
        self,
        config: RecorderConfig,
        session: SessionInfo | None = None,
        on_fault: Callable[[str], None] | None = None,
        robot_model: RobotModelTopics | None = None,
    ) -> None:
        """``robot_model``: also record the robot-model topics it derives (for Foxglove's 3D panel)."""
        self.config = config
        self._robot_model = robot_model
        self.session = session or SessionInfo(operator_notes=config.operator_notes)
        self._on_fault = on_fault
        self._typestore = recording_typestore()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._state = RecorderState.IDLE
        self._fault: str | None = None
        self._bag: BagWriter | None = None
        self._summary: BagSummary | None = None
        self._tracker = EpisodeTracker()
        self._sources: list[Any] = []
        self._bridge: Any = None
        self._thread: threading.Thread | None = None
        self._counts: dict[str, int] = {}
        self._bytes_written = 0
        self._discarded = 0
        self._undecodable = 0
        self._guard: DiskGuard | None = None

    # --- control ----------------------------------------------------------------------------
    def start(self, *, dds: bool = True, participant: Any = None, ros_node: Any = None) -> Path:
        """Open the bag and start recording; returns the bag directory.

        ``dds``: read the raw DDS topics (``participant`` default :func:`asap_ros.runtime.dds.participant`).
        ``ros_node``: subscribe to the configured ROS topics and report status on diagnostics.
        """
        if self._state is not RecorderState.IDLE:
            raise RuntimeError("a Recorder records one session: create a new one")
        cfg = self.config
        ros_topics: dict[str, str] = {}
        if ros_node is not None:
            from asap_ros.recording.ros_bridge import resolved_topics

            ros_topics = resolved_topics(ros_node, cfg.ros_topics)
        recorded = [*T.DDS_TOPICS.values(), *T.RECORDER_TOPICS]
        recorded += [T.RecordedTopic(name, T.ROS_TYPES[key]) for key, name in ros_topics.items()]
        if self._robot_model is not None:
            recorded += self._robot_model.topics
        name = cfg.bag_name or time.strftime("session_%Y%m%d_%H%M%S")
        cfg.output_dir.mkdir(parents=True, exist_ok=True)
        self._bag = BagWriter(
            cfg.output_dir / name, recorded, compression=cfg.compression, split=cfg.split,
            fsync=cfg.fsync, custom_data=self.session.custom_data(),
        )
        self._counts = {t.name: 0 for t in recorded}
        self._guard = DiskGuard(self._bag.path, cfg.min_free_bytes)
        self._state = RecorderState.RECORDING
        if self._robot_model is not None:  # the description is the bag's first message
            now = time.time_ns()
            self._write_derived(self._robot_model.start_messages(now), now)
        self._write_session(time.time_ns())
        self._thread = threading.Thread(target=self._run, name="recorder-writer", daemon=True)
        self._thread.start()
        try:
            self._start_sources(dds, participant, ros_node)
        except BaseException:
            self.stop("recorder start-up failed")
            raise
        return self._bag.path

    def _start_sources(self, dds: bool, participant: Any, ros_node: Any) -> None:
        if dds:
            from asap_ros.recording.dds_source import DdsSource

            if participant is None:
                from asap_ros.runtime.dds import participant as process_participant

                participant = process_participant()
            self._sources.append(DdsSource(self.submit, participant, on_error=self._source_failed))
        if ros_node is not None:
            from asap_ros.recording.ros_bridge import RosBridge

            self._bridge = RosBridge(ros_node, self.submit, self.config.ros_topics, self.status, self.config.status_rate_hz)
            self._sources.append(self._bridge)

    def submit(self, topic: str, log_time_ns: int, data: bytes, publish_time_ns: int = 0) -> None:
        """Queue one CDR message for ``topic`` (any thread); dropped (and counted) once stopped."""
        if topic not in self._counts:
            raise AsapError(f"{topic!r} is not recorded (topics: {', '.join(self._counts)})")
        if self._state is RecorderState.RECORDING:
            self._queue.put((topic, log_time_ns, data, publish_time_ns))
        else:
            self._discarded += 1

    def _source_failed(self, text: str) -> None:
        self._queue.put((_FAULT, text))

    def stop(self, reason: str = "recording stopped") -> BagSummary | None:
        """Stop the sources, write what is queued, close the bag; ``None`` if it was never opened."""
        for source in self._sources:
            source.close()  # nothing new arrives after this
        self._sources.clear()
        if self._thread is not None:
            self._queue.put((_STOP, reason))
            self._thread.join()
            self._thread = None
        if self._bridge is not None:
            self._bridge.finish()
            self._bridge = None
        return self._summary

    def status(self) -> RecorderStatus:
        return RecorderStatus(
            state=self._state,
            bag=self._bag.path if self._bag else None,
            fault=self._fault,
            message_counts=dict(self._counts),
            bytes_written=self._bytes_written,
            backlog=self._queue.qsize(),
            discarded=self._discarded,
            undecodable=self._undecodable,
            episode=self._tracker.open_episode,
            host=self.session.host,
        )

    # --- writer thread ----------------------------------------------------------------------
    def _run(self) -> None:
        period = self.config.flush_period_s
        next_flush = time.monotonic() + period
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, next_flush - time.monotonic()))
            except queue.Empty:
                item = None
            if item is not None and item[0] is _STOP:
                self._finish(time.time_ns(), item[1])
                return
            if item is not None and item[0] is _FAULT:
                if self._state is RecorderState.RECORDING:
                    self._fail(item[1])
                continue
            if self._state is not RecorderState.RECORDING:
                if item is not None:
                    self._discarded += 1
                continue
            try:
                if item is not None:
                    self._write(*item)
                if time.monotonic() >= next_flush:
                    self._flush()
                    next_flush = max(next_flush + period, time.monotonic())
            except Exception as exc:  # noqa: BLE001 -- end the recording cleanly and say why, never die silently
                self._fail(f"writing {self._bag.path} failed: {type(exc).__name__}: {exc}")

    def _write(self, topic: str, log_time_ns: int, data: bytes, publish_time_ns: int) -> None:
        self._bag.write(topic, log_time_ns, data, publish_time_ns)
        self._counts[topic] += 1
        if self._robot_model is not None:
            self._write_derived(self._robot_model.on_message(topic, log_time_ns, data), log_time_ns)
        if topic == T.TRANSITION or (topic == T.LOWSTATE and not self.session.robot):
            try:
                msg = self._typestore.deserialize_cdr(data, self._bag.msgtype(topic))
            except Exception:  # noqa: BLE001 -- stored as received; only its meaning is lost
                self._undecodable += 1
                return
            self._interpret(topic, msg, log_time_ns)

    def _interpret(self, topic: str, msg: Any, log_time_ns: int) -> None:
        """Episodes from transitions; the robot's version from the first LowState."""
        if topic == T.TRANSITION:
            ended = self._tracker.on_transition(msg.stamp_ns, msg.from_mode, msg.to_mode, msg.reason, msg.motion)
            if ended is not None:
                self._write_episode(ended, log_time_ns)
        else:
            self.session.robot = {
                "version": ".".join(str(int(v)) for v in msg.version),
                "mode_machine": str(msg.mode_machine),
            }
            self._bag.update_custom_data(self.session.custom_data())
            self._write_session(log_time_ns)

    def _write_own(self, topic: str, msgtype: str, log_time_ns: int, **fields: Any) -> None:
        msg = self._typestore.types[msgtype](**fields)
        self._bag.write(topic, log_time_ns, bytes(self._typestore.serialize_cdr(msg, msgtype)))
        self._counts[topic] += 1

    def _write_derived(self, messages: Iterable[tuple[str, bytes]], log_time_ns: int) -> None:
        for topic, data in messages:
            self._bag.write(topic, log_time_ns, data)
            self._counts[topic] += 1

    def _write_session(self, log_time_ns: int) -> None:
        self._write_own(T.SESSION, "std_msgs/msg/String", log_time_ns, data=self.session.to_json())

    def _write_episode(self, episode: Episode, log_time_ns: int) -> None:
        self._write_own(T.EPISODE, "asap_ros/msg/Episode", log_time_ns, **asdict(episode))

    def _flush(self) -> None:
        self._bag.flush()
        self._bytes_written = self._bag.bytes_written
        fault = self._guard.check()
        if fault:
            self._fail(fault)

    def _finish(self, stamp_ns: int, reason: str) -> None:
        """Everything queued is written (the sources closed first): cut the episode, close the bag."""
        if self._state is not RecorderState.RECORDING:
            return
        try:
            self._close_bag(stamp_ns, reason)
            self._state = RecorderState.STOPPED
        except Exception as exc:  # noqa: BLE001 -- reported as a fault, the bag left for `bag repair`
            self._fail(f"closing {self._bag.path} failed: {type(exc).__name__}: {exc}")

    def _close_bag(self, stamp_ns: int, reason: str) -> None:
        cut = self._tracker.cut(stamp_ns, reason)
        if cut is not None:
            self._write_episode(cut, stamp_ns)
        self._summary = self._bag.close()
        self._bytes_written = sum((self._bag.path / f.name).stat().st_size for f in self._summary.files)

    def _fail(self, text: str) -> None:
        """Stop recording because of ``text``: close the bag if the disk still lets us."""
        if self._state is RecorderState.RECORDING:
            try:
                self._close_bag(time.time_ns(), text)
            except Exception as exc:  # noqa: BLE001 -- the disk failed: leave the bag for `bag repair`
                self._bag.abandon()
                text += f"; the bag could not be closed ({exc}): run `asap-ros bag repair {self._bag.path}`"
        self._state = RecorderState.FAULT
        self._fault = text
        if self._on_fault is not None:
            self._on_fault(text)
        if self._bridge is not None:
            self._bridge.publish_status()
