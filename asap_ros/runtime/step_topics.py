"""DDS types the runtime publishes for the recorder, and a publisher for them.

``rt/asap/policy_step``: one :class:`PolicyStep_` per control step.
``rt/asap/transition``: one :class:`ModeTransition_` per state-machine transition.

Both are final structs serialised as XCDR1, byte for byte the ROS 2 CDR of
``asap_ros/msg/PolicyStep`` and ``asap_ros/msg/ModeTransition``
(:mod:`asap_ros.recording.msgdefs`), so the recorder stores the received bytes unchanged.
(No ``from __future__ import annotations`` here: cyclonedds resolves the field types at run time.)
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import cyclonedds.idl.annotations as annotate
import cyclonedds.idl.types as types
import numpy as np
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Policy, Qos
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from asap_ros.core.state import NUM_MOTORS

if TYPE_CHECKING:
    from asap_ros.runtime.control_loop import StepRecord

POLICY_STEP_TOPIC = "rt/asap/policy_step"
TRANSITION_TOPIC = "rt/asap/transition"


@dataclass
@annotate.final
class PolicyStep_(IdlStruct, typename="asap_ros.msg.dds_.PolicyStep_"):
    """One control step (wire type ``asap_ros::msg::dds_::PolicyStep_``)."""

    stamp_ns: types.int64
    """System time (ns) at which this step's LowCmd was written."""
    control_tick: types.uint64
    mode: str
    """Controller mode during the step (``Mode`` name, e.g. ``TRACKING``)."""
    motion: str
    """Motion (policy) name, ``''`` if none."""
    episode: types.uint32
    motion_tick: types.int32
    """Control step within the motion (0 first), -1 when not tracking."""
    phase: types.float32
    lowstate_tick: types.uint32
    lowstate_stamp_ns: types.int64
    """Arrival time (ns) of the LowState the step was computed from."""
    mocap_stamp_ns: types.int64
    """Stamp (ns) of the newest mocap sample at the step, 0 if none."""
    obs: types.sequence[types.float32]
    raw_action: types.sequence[types.float32]
    q_target: types.sequence[types.float32]
    """29 position targets, G1 motor order."""
    compute_ns: types.int64
    latency_ns: types.int64
    """LowCmd write time minus LowState arrival time."""
    late: bool
    fault_latched: bool
    """DAMPING latched on this step (a fault found in it, an e-stop since the previous step, or the
    supervisor's takeover)."""


@dataclass
@annotate.final
class ModeTransition_(IdlStruct, typename="asap_ros.msg.dds_.ModeTransition_"):
    """One state-machine transition (wire type ``asap_ros::msg::dds_::ModeTransition_``)."""

    stamp_ns: types.int64
    from_mode: str
    to_mode: str
    reason: str
    motion: str
    """Motion at the transition, ``''`` if none."""


def _floats(name: str, values: Sequence[float] | np.ndarray, length: int | None = None) -> list[float]:
    array = np.asarray(values, dtype=np.float32).ravel()
    if length is not None and array.size != length:
        raise ValueError(f"PolicyStep_.{name} must have {length} values, got {array.size}")
    return array.tolist()


WRITER_HISTORY = 64
"""Samples a writer keeps for re-sending to a reader that missed them (1.3 s of policy steps)."""


class PolicyStepPublisher:
    """Builds and writes :class:`PolicyStep_` and :class:`ModeTransition_` from plain values.

    Serialising a step takes ~50 µs: call it from a thread other than the control thread.
    Writers are reliable with a keep-last history of :data:`WRITER_HISTORY` samples: a reader
    that lost a packet gets it again, and a slow or absent reader never blocks the writer.
    """

    def __init__(self, participant: DomainParticipant | None = None) -> None:
        """``participant``: default :func:`asap_ros.runtime.dds.participant` (after ``init_channels``)."""
        if participant is None:
            from asap_ros.runtime.dds import participant as process_participant

            participant = process_participant()
        qos = Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(WRITER_HISTORY))
        self._steps = DataWriter(participant, Topic(participant, POLICY_STEP_TOPIC, PolicyStep_), qos)
        self._transitions = DataWriter(participant, Topic(participant, TRANSITION_TOPIC, ModeTransition_), qos)
        self.episode = 0
        """Motion runs published so far by :meth:`publish_record`."""
        self.written = {POLICY_STEP_TOPIC: 0, TRANSITION_TOPIC: 0}
        """Samples written so far per DDS topic (benchmarks compare them with what a recorder got)."""

    def publish_step(
        self,
        *,
        stamp_ns: int,
        control_tick: int,
        mode: str,
        motion: str,
        episode: int,
        motion_tick: int,
        phase: float,
        lowstate_tick: int,
        lowstate_stamp_ns: int,
        mocap_stamp_ns: int,
        obs: Sequence[float] | np.ndarray,
        raw_action: Sequence[float] | np.ndarray,
        q_target: Sequence[float] | np.ndarray,
        compute_ns: int,
        latency_ns: int,
        late: bool,
        fault_latched: bool = False,
    ) -> None:
        """Write one :class:`PolicyStep_`; ``q_target`` must hold 29 values."""
        self._steps.write(
            PolicyStep_(
                stamp_ns=int(stamp_ns),
                control_tick=int(control_tick),
                mode=mode,
                motion=motion,
                episode=int(episode),
                motion_tick=int(motion_tick),
                phase=float(phase),
                lowstate_tick=int(lowstate_tick),
                lowstate_stamp_ns=int(lowstate_stamp_ns),
                mocap_stamp_ns=int(mocap_stamp_ns),
                obs=_floats("obs", obs),
                raw_action=_floats("raw_action", raw_action),
                q_target=_floats("q_target", q_target, NUM_MOTORS),
                compute_ns=int(compute_ns),
                latency_ns=int(latency_ns),
                late=bool(late),
                fault_latched=bool(fault_latched),
            )
        )
        self.written[POLICY_STEP_TOPIC] += 1

    def publish_transition(self, *, stamp_ns: int, from_mode: str, to_mode: str, reason: str, motion: str) -> None:
        """Write one :class:`ModeTransition_`."""
        self._transitions.write(
            ModeTransition_(stamp_ns=int(stamp_ns), from_mode=from_mode, to_mode=to_mode, reason=reason, motion=motion)
        )
        self.written[TRANSITION_TOPIC] += 1

    def publish_record(self, record: "StepRecord") -> None:
        """Write one control-loop step, preceded by its mode transition when it has one.

        Both are labelled with the motion the controller stamped on them in that step ('' for
        none). :attr:`episode` counts the transitions into TRACKING, so every step of one motion
        run carries the same number.
        """
        out, policy = record.output, record.output.policy
        if out.transition is not None:
            t = out.transition
            self.publish_transition(
                stamp_ns=t.stamp_ns, from_mode=t.from_mode.name, to_mode=t.to_mode.name, reason=t.reason, motion=t.motion or ""
            )
            self.episode += t.to_mode.name == "TRACKING"
        tracking = policy is not None
        self.publish_step(
            stamp_ns=record.stamp_ns, control_tick=record.control_tick, mode=out.mode.name,
            motion=(out.motion or "") if tracking else "", episode=self.episode,
            motion_tick=policy.tick if tracking else -1, phase=policy.phase if tracking else 0.0,
            lowstate_tick=record.lowstate_tick, lowstate_stamp_ns=record.lowstate_stamp_ns,
            mocap_stamp_ns=record.mocap_stamp_ns, obs=policy.obs if tracking else (),
            raw_action=policy.raw_action if tracking else (), q_target=out.command.q,
            compute_ns=record.compute_ns, latency_ns=record.latency_ns, late=record.late,
            fault_latched=record.fault_latched,
        )  # fmt: skip

    def matched_readers(self) -> int:
        """Readers currently matched on ``rt/asap/policy_step`` (e.g. a running recorder)."""
        return len(self._steps.get_matched_subscriptions())

    def close(self) -> None:
        """Delete the writers now (not at interpreter exit, where cyclonedds can hang)."""
        from asap_ros.runtime.dds import close_entity

        close_entity(self._steps)
        close_entity(self._transitions)
