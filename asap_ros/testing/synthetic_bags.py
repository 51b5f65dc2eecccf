"""Synthetic session bags: a known kinematic motion written with the recorder's ``BagWriter``.

For the exporter's tests and throughput benchmark. Every recorded value is an analytic
function of time (:class:`SyntheticMotion`), so what the exporter resamples can be checked
against the truth, and an hour of data is written in about a minute. The bag has the
recorder's layout (topics, types, episode and transition messages, session description);
the timing mimics a real session: LowState at 500 Hz, the actor at 50 Hz on every 10th
LowState, mocap at 200 Hz off the control grid, logged 5 ms after capture.

It is not physics (``asap-ros sim --record`` records a simulated robot) and LowState/LowCmd
CRCs are left 0: the exporter does not read them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.core.quaternion import quat_conjugate, quat_multiply, quat_rotate
from asap_ros.core.state import NUM_MOTORS
from asap_ros.export.cdr_columns import encode_columns
from asap_ros.g1.layout import LOWCMD_LAYOUT, LOWCMD_WIRE, LOWSTATE_LAYOUT, LOWSTATE_WIRE, NUM_SLOTS
from asap_ros.recording import topics
from asap_ros.recording.bag_writer import BagWriter
from asap_ros.recording.topics import DDS_TOPICS, RECORDER_TOPICS, RecordedTopic
from asap_ros.recording.typestore import recording_typestore
from asap_ros.tracking.kinematics import DRIVEN_MOTORS

MS = 1_000_000
LOWSTATE_PERIOD_NS = 2 * MS
CONTROL_DECIMATION = 10
MOCAP_PERIOD_NS = 5 * MS
MOCAP_LATENCY_NS = 5 * MS
STATE_ARRIVAL_NS = 30_000
"""The runtime's arrival stamp of a LowState lags the recorder's log time by this much."""
STEP_COMPUTE_NS = 400_000
PREPARE_S = 0.5
DAMPING_KD = 8.0
FAULT_REASON = "policy kick: action is not finite"
OBS_DIM = 380
MOCAP_TYPE = "geometry_msgs/msg/PoseStamped"


@dataclass(frozen=True)
class SyntheticPlan:
    """The session: HOLD, then per episode PREPARE -> TRACKING -> HOLD."""

    episodes: int = 2
    episode_s: float = 2.0
    hold_s: float = 0.5
    motion: str = "CR7_level1"
    clip_file: str = ""
    """Named in the session description as the motion's clip (may be empty)."""
    estop_last: bool = False
    """The last episode ends in DAMPING halfway through (e-stop), and the session with it."""
    fault_last: bool = False
    """As ``estop_last``, but a fault latches on an actor step: the runtime records that step in
    DAMPING with ``fault_latched``, its rejected (NaN) action and the damping command."""
    mocap: bool = True
    mocap_offset_ns: int = 1_300_000
    """Mocap captures are off the LowState grid by this much (0: on it, so every tick has a sample)."""
    action_amplitude: float = 0.5
    """Of the raw actions; targets beyond the joint limits given to the writer are clamped to them."""
    start_ns: int = 1_700_000_000 * 1_000_000_000
    compression: str = "zstd"
    log_batch_ms: float = 0.0
    """Log times of DDS samples rounded up to this grid, as a recorder that drains and stamps
    in batches gives them (several samples, one stamp); 0: exact."""

    def logged(self, stamps: np.ndarray) -> np.ndarray:
        """The recorder's log time of samples that arrived at ``stamps``."""
        batch = int(self.log_batch_ms * MS)
        return stamps if batch <= 0 else -(-stamps // batch) * batch

    @property
    def ends_in_damping(self) -> bool:
        return self.estop_last or self.fault_last

    @property
    def steps_per_episode(self) -> int:
        return int(round(self.episode_s * 1e9 / (LOWSTATE_PERIOD_NS * CONTROL_DECIMATION)))


class SyntheticMotion:
    """The truth: pelvis pose, joint angles and actor outputs as functions of time / tick."""

    def __init__(self, default_q: np.ndarray):
        self.default_q = np.asarray(default_q, dtype=np.float64)
        joints = np.arange(NUM_MOTORS)
        self._omega = 1.0 + 0.1 * joints
        self._phase = 0.3 * joints

    def root_pos(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        return np.stack([0.3 * t, 0.1 * np.sin(t), 0.75 + 0.02 * np.sin(2.0 * t)], axis=-1)

    def _angles(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        t = np.asarray(t, dtype=np.float64)
        return 0.2 * t, np.full_like(t, 0.2), 0.05 * np.sin(t), 0.05 * np.cos(t)

    def root_quat_wxyz(self, t: np.ndarray) -> np.ndarray:
        """Yaw 0.2 t, then roll 0.05 sin t about the body x axis."""
        yaw, _, roll, _ = self._angles(t)
        zero = np.zeros_like(yaw)
        qz = np.stack([np.cos(yaw / 2), zero, zero, np.sin(yaw / 2)], axis=-1)
        qx = np.stack([np.cos(roll / 2), np.sin(roll / 2), zero, zero], axis=-1)
        return quat_multiply(qz, qx)

    def body_ang_vel(self, t: np.ndarray) -> np.ndarray:
        yaw, yaw_rate, _, roll_rate = self._angles(t)
        world = np.stack([roll_rate * np.cos(yaw), roll_rate * np.sin(yaw), yaw_rate], axis=-1)
        return quat_rotate(quat_conjugate(self.root_quat_wxyz(t)), world)

    def q(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)[..., None]
        return self.default_q + 0.3 * np.sin(self._omega * t + self._phase)

    def dq(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)[..., None]
        return 0.3 * self._omega * np.cos(self._omega * t + self._phase)

    @staticmethod
    def raw_action(tick: np.ndarray, amplitude: float = 0.5) -> np.ndarray:
        tick = np.asarray(tick, dtype=np.float64)[..., None]
        return (amplitude * np.sin(0.1 * tick + 0.3 * np.arange(len(DRIVEN_MOTORS)))).astype(np.float32)

    @staticmethod
    def obs(tick: np.ndarray) -> np.ndarray:
        tick = np.asarray(tick, dtype=np.float64)[..., None]
        return np.cos(0.01 * tick + np.arange(OBS_DIM)).astype(np.float32)


@dataclass(frozen=True)
class _Segment:
    mode: str
    motion: str
    start_ns: int
    end_ns: int
    episode: int
    """1-based episode number while PREPARE/TRACKING, else 0."""


def _segments(plan: SyntheticPlan) -> list[_Segment]:
    second = 1_000_000_000
    t = plan.start_ns
    segments = [_Segment("HOLD", "", t, t := t + int(plan.hold_s * second), 0)]
    for episode in range(1, plan.episodes + 1):
        last = episode == plan.episodes
        segments.append(_Segment("PREPARE", plan.motion, t, t := t + int(PREPARE_S * second), episode))
        tracking_s = plan.episode_s / 2 if last and plan.ends_in_damping else plan.episode_s
        segments.append(_Segment("TRACKING", plan.motion, t, t := t + int(tracking_s * second), episode))
        after = "DAMPING" if last and plan.ends_in_damping else "HOLD"
        segments.append(_Segment(after, "", t, t := t + int(plan.hold_s * second), 0))
    return segments


class _SessionWriter:
    """Generates and writes the messages of one synthetic session, one second at a time."""

    def __init__(self, path: Path, plan: SyntheticPlan, motion: SyntheticMotion,
                 q_limits: tuple[np.ndarray, np.ndarray] | None = None):  # fmt: skip
        self.plan, self.motion, self.q_limits = plan, motion, q_limits
        self.store = recording_typestore()
        bag_topics = [*DDS_TOPICS.values(), *RECORDER_TOPICS]
        if plan.mocap:
            bag_topics.append(RecordedTopic(topics.MOCAP_POSE, MOCAP_TYPE))
        self.writer = BagWriter(path, bag_topics, compression=plan.compression, fsync=False)
        self.segments = _segments(plan)
        self._lowstate_proto = LOWSTATE_WIRE.to_cdr(np.zeros((), dtype=LOWSTATE_LAYOUT))
        self._lowcmd_proto = LOWCMD_WIRE.to_cdr(np.zeros((), dtype=LOWCMD_LAYOUT))
        self._mocap_proto = self._serialize(MOCAP_TYPE, self.store.types[MOCAP_TYPE](
            header=self.store.types["std_msgs/msg/Header"](
                stamp=self.store.types["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id="world"
            ),
            pose=self.store.types["geometry_msgs/msg/Pose"](
                position=self.store.types["geometry_msgs/msg/Point"](x=0.0, y=0.0, z=0.0),
                orientation=self.store.types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
            ),
        ))  # fmt: skip
        self._step_protos: dict[tuple[str, str, bool], bytes] = {}

    def _serialize(self, msgtype: str, msg: object) -> bytes:
        return bytes(self.store.serialize_cdr(msg, msgtype))

    def _segment_at(self, stamps: np.ndarray) -> np.ndarray:
        starts = np.array([s.start_ns for s in self.segments])
        return np.clip(np.searchsorted(starts, stamps, side="right") - 1, 0, len(self.segments) - 1)

    # --- per-topic blocks: (log times, raw messages) ------------------------------------------
    def lowstate(self, index: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
        stamps = self.plan.start_ns + index * LOWSTATE_PERIOD_NS
        t = (stamps - self.plan.start_ns) / 1e9
        pad = np.zeros((len(index), NUM_SLOTS - NUM_MOTORS))
        raws = encode_columns(self.store, "unitree_hg/msg/LowState", self._lowstate_proto, {
            "tick": index * (LOWSTATE_PERIOD_NS // MS),
            "motor_state.q": np.hstack([self.motion.q(t), pad]),
            "motor_state.dq": np.hstack([self.motion.dq(t), pad]),
            "motor_state.tau_est": np.hstack([self.motion.q(t) - self.motion.default_q, pad]),
            "imu_state.quaternion": self.motion.root_quat_wxyz(t),
            "imu_state.gyroscope": self.motion.body_ang_vel(t),
            "imu_state.accelerometer": np.tile([0.0, 0.0, 9.81], (len(index), 1)),
        })  # fmt: skip
        return self.plan.logged(stamps), raws

    def control(self, index: np.ndarray) -> list[tuple[str, np.ndarray, list[bytes]]]:
        """Policy steps and LowCmds of the control ticks on LowState samples ``index``."""
        state_log = self.plan.start_ns + index * LOWSTATE_PERIOD_NS
        step_stamp = state_log + STATE_ARRIVAL_NS + STEP_COMPUTE_NS
        segment = self._segment_at(state_log)
        actions, targets, ticks, phases, latched = self._actor(state_log, segment)
        damping = np.array([self.segments[seg].mode == "DAMPING" for seg in segment])
        pad = np.zeros((len(index), NUM_SLOTS - NUM_MOTORS))
        gains = np.where(damping[:, None], 0.0, 1.0)
        lowcmds = encode_columns(self.store, "unitree_hg/msg/LowCmd", self._lowcmd_proto, {
            "motor_cmd.q": np.hstack([targets, pad]),
            "motor_cmd.kp": np.hstack([gains * 100.0 * np.ones(NUM_MOTORS), pad]),
            "motor_cmd.kd": np.hstack([np.where(damping[:, None], DAMPING_KD, 2.0) * np.ones(NUM_MOTORS), pad]),
            "motor_cmd.mode": np.tile(np.r_[np.ones(NUM_MOTORS), pad[0]], (len(index), 1)),
        })  # fmt: skip
        steps: list[bytes] = [b""] * len(index)
        acted = ticks >= 0
        for seg in np.unique(segment):
            for actor in (False, True):
                rows = np.flatnonzero((segment == seg) & (acted == actor))
                if not len(rows):
                    continue
                columns = {
                    "stamp_ns": step_stamp[rows], "control_tick": index[rows] // CONTROL_DECIMATION,
                    "episode": np.full(len(rows), self.segments[seg].episode or self._episode_before(seg)),
                    "motion_tick": ticks[rows], "phase": phases[rows],
                    "lowstate_tick": index[rows] * (LOWSTATE_PERIOD_NS // MS),
                    "lowstate_stamp_ns": state_log[rows] + STATE_ARRIVAL_NS, "q_target": targets[rows],
                    "fault_latched": latched[rows],
                }  # fmt: skip
                if actor:
                    columns.update(obs=self.motion.obs(ticks[rows]), raw_action=actions[rows])
                raws = encode_columns(self.store, "asap_ros/msg/PolicyStep", self._step_proto(seg, actor), columns)
                for row, raw in zip(rows, raws):
                    steps[row] = raw
        logged = self.plan.logged
        return [(topics.LOWCMD, logged(step_stamp + 50_000), lowcmds),
                (topics.POLICY_STEP, logged(step_stamp + 100_000), steps)]  # fmt: skip

    def _episode_before(self, seg: int) -> int:
        """The episode number a step after a run still carries (the runtime counts runs started)."""
        return max((s.episode for s in self.segments[:seg]), default=0)

    def _actor(self, state_log: np.ndarray, segment: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per control tick: raw action, targets, motion tick (-1: no actor output), phase, fault_latched."""
        ticks = np.full(len(state_log), -1, dtype=np.int64)
        latched = np.zeros(len(state_log), dtype=bool)
        period = LOWSTATE_PERIOD_NS * CONTROL_DECIMATION
        for seg in np.unique(segment):
            s = self.segments[seg]
            if s.mode == "TRACKING":
                rows = segment == seg
                ticks[rows] = (state_log[rows] - s.start_ns) // period
            elif s.mode == "DAMPING":  # its first step latched it: the fault step, or the first after an e-stop
                first = (segment == seg) & (state_log < s.start_ns + period)
                latched |= first
                if self.plan.fault_last:
                    ticks[first] = (state_log[first] - self.segments[seg - 1].start_ns) // period
        acted = ticks >= 0
        actions = self.motion.raw_action(np.maximum(ticks, 0), self.plan.action_amplitude)
        actions[latched & acted] = np.nan  # the output the fault check rejected
        targets = np.tile(self.motion.default_q, (len(ticks), 1))
        tracked = acted & ~latched
        targets[np.ix_(tracked, DRIVEN_MOTORS)] += np.float64(0.25) * actions[tracked]
        if self.q_limits is not None:
            np.clip(targets, *self.q_limits, out=targets)
        damping = np.array([self.segments[seg].mode == "DAMPING" for seg in segment])
        targets[damping] = 0.0  # the damping command: kp 0, q 0
        phases = np.where(acted, (ticks + 1) / self.plan.steps_per_episode, 0.0)
        return actions, targets, ticks, phases, latched

    def _step_proto(self, seg: int, actor: bool) -> bytes:
        s = self.segments[seg]
        key = (s.mode, s.motion, actor)
        if key not in self._step_protos:
            step = self.store.types["asap_ros/msg/PolicyStep"]
            empty = np.zeros(0, dtype=np.float32)
            self._step_protos[key] = self._serialize("asap_ros/msg/PolicyStep", step(
                stamp_ns=0, control_tick=0, mode=s.mode, motion=self.plan.motion if actor else "", episode=0,
                motion_tick=-1, phase=0.0, lowstate_tick=0, lowstate_stamp_ns=0, mocap_stamp_ns=0,
                obs=np.zeros(OBS_DIM, np.float32) if actor else empty,
                raw_action=np.zeros(len(DRIVEN_MOTORS), np.float32) if actor else empty,
                q_target=np.zeros(NUM_MOTORS, np.float32), compute_ns=STEP_COMPUTE_NS, latency_ns=STEP_COMPUTE_NS,
                late=False, fault_latched=False,
            ))  # fmt: skip
        return self._step_protos[key]

    def mocap(self, index: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
        capture = self.plan.start_ns + self.plan.mocap_offset_ns + index * MOCAP_PERIOD_NS
        t = (capture - self.plan.start_ns) / 1e9
        pos, quat = self.motion.root_pos(t), self.motion.root_quat_wxyz(t)
        raws = encode_columns(self.store, MOCAP_TYPE, self._mocap_proto, {
            "header.stamp.sec": capture // 1_000_000_000, "header.stamp.nanosec": capture % 1_000_000_000,
            **{f"pose.position.{a}": pos[:, i] for i, a in enumerate("xyz")},
            **{f"pose.orientation.{a}": quat[:, i] for i, a in enumerate("wxyz")},
        })  # fmt: skip
        return capture + MOCAP_LATENCY_NS, raws

    def events(self) -> list[tuple[str, int, bytes]]:
        """Session description, transitions and episode messages."""
        types = self.store.types
        session = {"policies": [{"name": self.plan.motion, "clip_file": self.plan.clip_file}], "synthetic": True}
        out = [(topics.SESSION, self.plan.start_ns, self._serialize("std_msgs/msg/String",
                types["std_msgs/msg/String"](data=json.dumps(session))))]  # fmt: skip
        for before, after in zip(self.segments, self.segments[1:]):
            damping = FAULT_REASON if self.plan.fault_last else "e-stop: operator"
            reason = {"TRACKING": "start", "HOLD": "motion done", "DAMPING": damping}.get(after.mode, "")
            motion = before.motion or after.motion
            out.append((topics.TRANSITION, after.start_ns, self._serialize("asap_ros/msg/ModeTransition",
                types["asap_ros/msg/ModeTransition"](stamp_ns=after.start_ns, from_mode=before.mode,
                                                     to_mode=after.mode, reason=reason, motion=motion))))  # fmt: skip
            if before.mode == "TRACKING":
                out.append((topics.EPISODE, after.start_ns + MS, self._serialize("asap_ros/msg/Episode",
                    types["asap_ros/msg/Episode"](index=before.episode, motion=before.motion, start_ns=before.start_ns,
                                                  end_ns=after.start_ns, end_mode=after.mode, end_reason=reason,
                                                  estop=after.mode == "DAMPING", complete=True))))  # fmt: skip
        return out

    def write(self) -> Path:
        end_ns = self.segments[-1].end_ns
        total = (end_ns - self.plan.start_ns) // LOWSTATE_PERIOD_NS
        events = self.events()
        block = 1_000_000_000 // LOWSTATE_PERIOD_NS
        mocap_per_block = 1_000_000_000 // MOCAP_PERIOD_NS
        for first in range(0, total, block):
            index = np.arange(first, min(first + block, total))
            parts = [(topics.LOWSTATE, *self.lowstate(index))]
            parts += self.control(index[index % CONTROL_DECIMATION == 0])
            if self.plan.mocap:
                m = first // block * mocap_per_block
                parts.append((topics.MOCAP_POSE, *self.mocap(np.arange(m, m + mocap_per_block))))
            lo = self.plan.start_ns + first * LOWSTATE_PERIOD_NS
            hi = lo + block * LOWSTATE_PERIOD_NS
            parts += [(topic, np.array([s]), [raw]) for topic, s, raw in events if lo <= s < hi]
            self._write_sorted(parts)
        return self.writer.close().path

    def _write_sorted(self, parts: list[tuple[str, np.ndarray, list[bytes]]]) -> None:
        stamps = np.concatenate([p[1] for p in parts])
        names = [p[0] for p in parts for _ in range(len(p[1]))]
        raws = [raw for p in parts for raw in p[2]]
        for i in np.argsort(stamps, kind="stable"):
            self.writer.write(names[i], int(stamps[i]), raws[i])
        self.writer.flush()


def write_synthetic_session(path: str | Path, plan: SyntheticPlan, default_q: np.ndarray,
                            q_limits: tuple[np.ndarray, np.ndarray] | None = None) -> Path:  # fmt: skip
    """Write a synthetic session bag at ``path`` (must not exist); returns the bag directory.

    ``q_limits``: (lower, upper) joint limits the targets are clamped to, as the runtime does.
    """
    return _SessionWriter(Path(path), plan, SyntheticMotion(default_q), q_limits).write()
