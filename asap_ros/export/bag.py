"""Reading a session bag (``asap_ros.recording`` layout) into :class:`RecordedEpisode` objects.

Episodes come from ``/asap/episode`` (written by the recorder when a motion run ends); a run
still TRACKING when the recording stopped (no episode message) is found from
``/asap/transition`` and marked incomplete. Each episode's messages are read by time range
(MCAP chunk indexes: only the chunks that overlap it are decompressed) and decoded column-wise
(:mod:`asap_ros.export.cdr_columns`).

Sample times: LowStates are put on the system clock through the robot's own ``tick`` (a line
fitted through the runtime's arrival stamps of the samples the actor used; the recorder's
log times jitter with its batching); each actor step's LowCmd is put at the step's write
stamp; mocap uses the capture stamp in its header. The actor's tick time is the time of
the very LowState its observation was built from.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import yaml

from asap_ros.core.errors import ConfigError
from asap_ros.core.state import NUM_MOTORS
from asap_ros.export.cdr_columns import RawMessages, decode_columns
from asap_ros.export.episode import COMPLETED, PolicySteps, RecordedEpisode, Stream
from asap_ros.export.mcap_index import McapIndex
from asap_ros.export.resample import nearest
from asap_ros.recording import topics
from asap_ros.recording.episodes import Episode
from asap_ros.recording.metadata import METADATA_FILE

TRACKING = "TRACKING"
DAMPING = "DAMPING"
READ_MARGIN_NS = 100_000_000
"""Samples read on each side of an episode (interpolation needs a neighbour beyond each end)."""
MOCAP_LOG_MARGIN_NS = 1_000_000_000
"""Mocap is logged after capture (latency); read this much more by log time, then select by stamp."""
FAULT_LATCHED = "fault_latched"
STEP_MATCH_NS = 10_000_000
"""A LowCmd logged within half a control period of a step's write stamp is that step's command."""


class SessionBag:
    """A recorded session opened for reading; use as a context manager."""

    def __init__(self, path: str | Path, mocap_topic: str = topics.MOCAP_POSE):
        from asap_ros.recording.typestore import bag_typestore

        self.path = Path(path)
        if self.path.is_file() and self.path.suffix == ".mcap":
            self.path = self.path.parent
        self.mocap_topic = mocap_topic
        self.index = McapIndex(self._files())
        self.typestore = bag_typestore(self.index.definitions())
        """Our types as this bag defines them (an older recording keeps its own layout)."""

    def _files(self) -> list[Path]:
        metadata = self.path / METADATA_FILE
        if not metadata.is_file():
            problem = "not a rosbag2 bag directory (no metadata.yaml; try `asap-ros bag repair`)"
            raise ConfigError(self.path, None, problem)
        try:
            info = yaml.safe_load(metadata.read_text(encoding="utf-8"))["rosbag2_bagfile_information"]
            files = [self.path / name for name in info["relative_file_paths"]]
        except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
            raise ConfigError(metadata, "rosbag2_bagfile_information", f"unreadable bag metadata: {exc}") from exc
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise ConfigError(metadata, "relative_file_paths", "files missing from the bag", missing)
        return files

    def close(self) -> None:
        """Nothing stays open between reads; kept for the context-manager protocol."""

    def __enter__(self) -> SessionBag:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- raw access -------------------------------------------------------------------------
    def has_topic(self, topic: str) -> bool:
        return topic in self.index.topics

    def _msgtype(self, topic: str) -> str:
        try:
            return self.index.topics[topic].msgtype
        except KeyError:
            known = ", ".join(sorted(self.index.topics)) or "none"
            raise ConfigError(self.path, topic, f"topic missing from the bag (topics: {known})") from None

    def raw(self, topic: str, start_ns: int | None = None, stop_ns: int | None = None
            ) -> tuple[np.ndarray, RawMessages]:  # fmt: skip
        """Log times and raw CDR bytes of ``topic`` with ``start_ns <= log time < stop_ns``."""
        self._msgtype(topic)
        return self.index.read([topic], start_ns, stop_ns)[topic]

    def columns(self, topic: str, raws: RawMessages, fields: Sequence[str]) -> dict[str, np.ndarray]:
        msgtype = self._msgtype(topic)
        try:
            return decode_columns(self.typestore, msgtype, raws, fields)
        except (KeyError, ValueError) as exc:
            raise ConfigError(self.path, topic, f"cannot decode {msgtype}: {exc}") from exc

    @functools.cached_property
    def _events(self) -> dict[str, list]:
        """Deserialised session, episode and transition messages (one read; they are few)."""
        small = [t for t in (topics.SESSION, topics.EPISODE, topics.TRANSITION) if self.has_topic(t)]
        raw = self.index.read(small)
        return {
            topic: [self.typestore.deserialize_cdr(raws[i], self._msgtype(topic)) for i in range(len(raws))]
            for topic, (_, raws) in raw.items()
        }

    # --- session ------------------------------------------------------------------------------
    def session_info(self) -> dict:
        """The session description the recorder wrote on ``/asap/session`` (empty if none)."""
        messages = self._events.get(topics.SESSION)
        if not messages:
            return {}
        try:
            return json.loads(messages[-1].data)
        except ValueError as exc:
            raise ConfigError(self.path, topics.SESSION, f"session description is not JSON: {exc}") from exc

    def transitions(self) -> list:
        """Every ``/asap/transition`` message (deserialised), in stamp order."""
        return sorted(self._events.get(topics.TRANSITION, []), key=lambda t: int(t.stamp_ns))

    def mocap(self) -> Stream | None:
        """The whole session's mocap on its capture stamps; ``None`` when the bag has none."""
        if not self.has_topic(self.mocap_topic):
            return None
        stream = self._mocap(*self.raw(self.mocap_topic))
        return stream if len(stream) else None

    def episodes(self) -> list[Episode]:
        """Every motion run of the session, in order (incomplete last run included)."""
        markers = [
            Episode(int(m.index), m.motion, int(m.start_ns), int(m.end_ns), m.end_mode, m.end_reason,
                          bool(m.estop), bool(m.complete))  # fmt: skip
            for m in self._events.get(topics.EPISODE, [])
        ]
        markers.extend(self._unterminated_runs(markers))
        return sorted(markers, key=lambda m: m.start_ns)

    def _unterminated_runs(self, known: list[Episode]) -> list[Episode]:
        """Runs that entered TRACKING but have no episode message (the recording was cut)."""
        starts = {m.start_ns for m in known}
        transitions = self._events.get(topics.TRANSITION, [])
        runs = []
        for i, t in enumerate(transitions):
            if t.to_mode != TRACKING or int(t.stamp_ns) in starts:
                continue
            left = next((u for u in transitions[i + 1 :] if u.from_mode == TRACKING), None)
            runs.append(
                Episode(
                    index=len(known) + len(runs) + 1,
                    motion=t.motion,
                    start_ns=int(t.stamp_ns),
                    end_ns=int(left.stamp_ns) if left is not None else self.index.end_ns,
                    end_mode=left.to_mode if left is not None else "",
                    end_reason=left.reason if left is not None else "the recording ended during the motion",
                    estop=left is not None and left.to_mode == DAMPING,
                    complete=left is not None,
                )
            )
        return runs

    # --- one episode --------------------------------------------------------------------------
    def read_episode(self, marker: Episode) -> RecordedEpisode:
        """All streams of one run, read in one pass over the chunks it spans."""
        wanted = [topics.POLICY_STEP, topics.LOWSTATE, topics.LOWCMD]
        for topic in wanted:
            self._msgtype(topic)
        if self.has_topic(self.mocap_topic):
            wanted.append(self.mocap_topic)
        read_from, read_to = marker.start_ns - READ_MARGIN_NS, marker.end_ns + READ_MARGIN_NS
        raw = self.index.read(wanted, read_from, read_to + MOCAP_LOG_MARGIN_NS)
        for topic in (topics.LOWSTATE, topics.LOWCMD):
            if len(raw[topic][1]) == 0:
                raise ConfigError(self.path, topic, f"no samples during episode {marker.index}")
        steps = self._policy_steps(marker, *raw[topics.POLICY_STEP])
        lo = int(min(steps.state_stamp_ns[0], steps.stamp_ns[0])) - READ_MARGIN_NS
        hi = int(max(steps.state_stamp_ns[-1], steps.stamp_ns[-1])) + READ_MARGIN_NS
        lowstate, steps = _on_tick_clock(self._lowstate(*raw[topics.LOWSTATE]).between(lo, hi), steps)
        lowcmd = _timed_by_steps(self._lowcmd(*raw[topics.LOWCMD]).between(lo, hi), steps)
        mocap = self._mocap(*raw[self.mocap_topic]) if self.mocap_topic in raw else None
        return RecordedEpisode(
            source=str(self.path),
            index=marker.index,
            motion=marker.motion,
            start_ns=marker.start_ns,
            end_ns=marker.end_ns,
            outcome=_outcome(marker, steps),
            estop=marker.estop,
            steps=steps,
            lowstate=lowstate,
            lowcmd=lowcmd,
            mocap=mocap.between(lo, hi) if mocap is not None and len(mocap) else None,
            mocap_topic=self.mocap_topic,
            ended=marker.complete,
            notes=tuple(self.layout_notes()),
        )

    def iter_episodes(self, wanted: Sequence[int] | None = None) -> Iterator[tuple[Episode, RecordedEpisode]]:
        """Markers and episodes, only those whose index is in ``wanted`` if given."""
        for marker in self.episodes():
            if wanted is None or marker.index in wanted:
                yield marker, self.read_episode(marker)

    def _policy_steps(self, marker: Episode, _stamps: np.ndarray, raws: RawMessages) -> PolicySteps:
        """The steps in which the actor ran: from the start transition to just after the end one (the
        last step runs the actor and leaves TRACKING, so it is recorded in the mode it switched to)."""
        head = self.columns(topics.POLICY_STEP, raws, ["stamp_ns", "motion_tick"])
        keep = np.flatnonzero(
            (head["motion_tick"] >= 0)
            & (head["stamp_ns"] >= marker.start_ns) & (head["stamp_ns"] <= marker.end_ns + READ_MARGIN_NS)
        )  # fmt: skip
        marked = self._has_field(topics.POLICY_STEP, FAULT_LATCHED)
        fields = ["stamp_ns", "motion_tick", "phase", "lowstate_tick", "lowstate_stamp_ns", "obs", "raw_action",
                  "q_target", FAULT_LATCHED if marked else "mode"]  # fmt: skip
        if len(keep) == 0:
            raise ConfigError(self.path, topics.POLICY_STEP, f"no TRACKING steps in episode {marker.index}")
        cols = self.columns(topics.POLICY_STEP, raws.take(keep), fields)
        return PolicySteps(
            tick=cols["motion_tick"].astype(np.int64),
            stamp_ns=cols["stamp_ns"].astype(np.int64),
            state_stamp_ns=cols["lowstate_stamp_ns"].astype(np.int64),
            phase=cols["phase"].astype(np.float64),
            obs=cols["obs"],
            raw_action=cols["raw_action"],
            q_target=cols["q_target"].astype(np.float64),
            lowstate_tick=cols["lowstate_tick"].astype(np.int64),
            fault_latched=cols[FAULT_LATCHED].astype(bool) if marked else cols["mode"] == DAMPING,
        )

    def _has_field(self, topic: str, name: str) -> bool:
        return any(field == name for field, _ in self.typestore.fielddefs[self._msgtype(topic)][1])

    def layout_notes(self) -> list[str]:
        """What an older recording's layout means for its export."""
        if self.has_topic(topics.POLICY_STEP) and not self._has_field(topics.POLICY_STEP, FAULT_LATCHED):
            return [f"{topics.POLICY_STEP} was recorded without {FAULT_LATCHED} (an older version): the step on "
                    "which a fault latched is taken to be the actor step recorded in DAMPING"]  # fmt: skip
        return []

    def _lowstate(self, stamps: np.ndarray, raws: RawMessages) -> Stream:
        c = self.columns(topics.LOWSTATE, raws, [
            "tick", "motor_state.q", "motor_state.dq", "motor_state.tau_est",
            "imu_state.quaternion", "imu_state.gyroscope", "imu_state.accelerometer",
        ])  # fmt: skip
        m = slice(0, NUM_MOTORS)
        return Stream(topics.LOWSTATE, stamps, {
            "tick": c["tick"].astype(np.int64),
            "q": c["motor_state.q"][:, m].astype(np.float64),
            "dq": c["motor_state.dq"][:, m].astype(np.float64),
            "tau_est": c["motor_state.tau_est"][:, m].astype(np.float64),
            "quat_wxyz": c["imu_state.quaternion"].astype(np.float64),
            "gyro": c["imu_state.gyroscope"].astype(np.float64),
            "acc": c["imu_state.accelerometer"].astype(np.float64),
        })  # fmt: skip

    def _lowcmd(self, stamps: np.ndarray, raws: RawMessages) -> Stream:
        keys = ("q", "dq", "tau", "kp", "kd", "mode")
        c = self.columns(topics.LOWCMD, raws, [f"motor_cmd.{k}" for k in keys])
        m = slice(0, NUM_MOTORS)
        columns = {k: c[f"motor_cmd.{k}"][:, m].astype(np.float64) for k in keys[:-1]}
        columns["enabled"] = c["motor_cmd.mode"][:, m] == 1
        return Stream(topics.LOWCMD, stamps, columns)

    def _mocap(self, _stamps: np.ndarray, raws: RawMessages) -> Stream:
        """Mocap samples on their capture stamps (header), not their log times."""
        c = self.columns(self.mocap_topic, raws, [
            "header.stamp.sec", "header.stamp.nanosec", "pose.position.x", "pose.position.y", "pose.position.z",
            "pose.orientation.w", "pose.orientation.x", "pose.orientation.y", "pose.orientation.z",
        ])  # fmt: skip
        stamps = c["header.stamp.sec"].astype(np.int64) * 1_000_000_000 + c["header.stamp.nanosec"].astype(np.int64)
        return Stream(self.mocap_topic, stamps, {
            "pos": np.stack([c[f"pose.position.{a}"] for a in "xyz"], axis=1),
            "quat_wxyz": np.stack([c[f"pose.orientation.{a}"] for a in "wxyz"], axis=1),
        })  # fmt: skip


def _on_tick_clock(lowstate: Stream, steps: PolicySteps) -> tuple[Stream, PolicySteps]:
    """LowState times from the robot's own counter, and tick times = those of the samples the actor used.

    The recorder's log times jitter (it stamps what it drains in batches, even several samples
    with one stamp); the robot's ``tick`` does not. A line through (tick, the runtime's arrival
    stamp) of the samples the actor used maps every LowState onto the system clock. Without
    two such samples (or with a tick wrap) the log times are kept.
    """
    ticks = lowstate["tick"]
    order = np.argsort(ticks, kind="stable")
    where = np.clip(np.searchsorted(ticks[order], steps.lowstate_tick), 0, max(len(ticks) - 1, 0))
    found = ticks[order][where] == steps.lowstate_tick if len(ticks) else np.zeros(len(steps), dtype=bool)
    if found.sum() < 2 or np.any(np.diff(ticks) <= 0):
        return lowstate, steps
    tick0, stamp0 = int(steps.lowstate_tick[found][0]), int(steps.state_stamp_ns[found][0])
    rate, offset = np.polyfit(steps.lowstate_tick[found] - tick0, steps.state_stamp_ns[found] - stamp0, 1)
    times = stamp0 + np.round(offset + rate * (ticks - tick0)).astype(np.int64)
    state_stamp = np.where(found, times[order][where], steps.state_stamp_ns)
    return Stream(lowstate.topic, times, lowstate.columns), dataclasses.replace(steps, state_stamp_ns=state_stamp)


def _timed_by_steps(lowcmd: Stream, steps: PolicySteps) -> Stream:
    """Each actor step's LowCmd (the one logged nearest its write stamp) put at that write stamp."""
    if len(lowcmd) == 0:
        return lowcmd
    own = nearest(lowcmd.stamps_ns, steps.stamp_ns)
    close = np.abs(lowcmd.stamps_ns[own] - steps.stamp_ns) < STEP_MATCH_NS
    stamps = lowcmd.stamps_ns.copy()
    stamps[own[close]] = steps.stamp_ns[close]
    return Stream(lowcmd.topic, stamps, lowcmd.columns)


def _outcome(marker: Episode, steps: PolicySteps) -> str:
    if marker.estop:
        return f"damping: {marker.end_reason}"
    if not marker.complete:
        return marker.end_reason or "the recording ended during the motion"
    if steps.reached_end():
        return COMPLETED
    return f"stopped early ({marker.end_mode}): {marker.end_reason}"
