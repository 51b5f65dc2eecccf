"""Raw actor actions against the targets the robot executed, and the policy's phase clock.

The runtime sends ``clip(scale * a + default_q, joint limits)`` (:mod:`asap_ros.core.policy`); the
recorded ``q_target`` is that executed target. ASAP's delta trainer replays the unclamped
``scale * a + default_q``. :class:`PolicyFacts` holds what that mapping and the phase clock
take from the motion's policy spec; :func:`clamp_counts` says how often, and by how much, the
joint limits cut the actor's targets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asap_ros.core.policy_spec import PolicySpec

CLAMP_TOLERANCE_RAD = 1e-5
"""A target counts as clamped when the executed one differs from ``scale * a + default`` by more
(the recorded targets are float32: rounding stays below 3e-7 rad)."""


@dataclass(frozen=True)
class PolicyFacts:
    """How a motion's actor turned raw actions into targets, and when each control step ran."""

    driven: np.ndarray
    """(n,) motor indices of the action vector, in its order."""
    default_q: np.ndarray
    """(n,) default pose of those joints, rad."""
    scale: float
    control_dt_s: float
    phase_start_s: float
    source: str

    @classmethod
    def of_spec(cls, spec: PolicySpec) -> PolicyFacts:
        driven = np.asarray(spec.driven_indices)
        return cls(driven, np.asarray(spec.default_q, dtype=np.float64)[driven], float(spec.action_scale),
                   float(spec.control_dt), float(spec.phase_start), str(spec.source))  # fmt: skip

    @property
    def fps(self) -> float:
        """The control rate as ASAP writes it (``1 / dt``, a float)."""
        return 1.0 / self.control_dt_s

    def unclamped_targets(self, raw_action: np.ndarray) -> np.ndarray:
        """(K, n) ``scale * a + default`` (the runtime's float64 arithmetic), before the joint limits."""
        return np.asarray(raw_action, dtype=np.float32) * np.float64(self.scale) + self.default_q

    def executed_actions(self, q_target: np.ndarray) -> np.ndarray:
        """(K, n) float32 raw-equivalent of executed targets (K, 29): ``(q - default) / scale``."""
        driven = np.asarray(q_target, dtype=np.float64)[:, self.driven]
        return ((driven - self.default_q) / self.scale).astype(np.float32)

    def motion_times(self, tick: np.ndarray) -> np.ndarray:
        """(K,) float32 motion time of the state the actor sees at control step ``tick``:
        ``tick * dt + start`` (its observation's phase is one step ahead, as in training)."""
        return (np.asarray(tick, dtype=np.float32) * np.float32(self.control_dt_s) + np.float32(self.phase_start_s))


@dataclass(frozen=True)
class ClampCounts:
    """Per joint: at how many actor steps the joint limits cut the target, and by how much at most."""

    joint_names: tuple[str, ...]
    ticks: int
    """Actor steps counted (the executed ones: a faulted step's command was damping)."""
    clamped_ticks: int
    """Steps with at least one joint clamped."""
    per_joint: tuple[int, ...]
    max_rad: tuple[float, ...]

    def to_dict(self) -> dict:
        return {
            "ticks": self.ticks,
            "clamped_ticks": self.clamped_ticks,
            "joints": {name: {"ticks": n, "max_rad": m}
                       for name, n, m in zip(self.joint_names, self.per_joint, self.max_rad) if n},
        }  # fmt: skip

def clamp_counts(raw_action: np.ndarray, q_target: np.ndarray, facts: PolicyFacts,
                 joint_names: tuple[str, ...]) -> ClampCounts:  # fmt: skip
    """Clamps of (K, n) raw actions against their (K, 29) executed targets; ``joint_names``: the n joints."""
    cut = np.abs(np.asarray(q_target, dtype=np.float64)[:, facts.driven] - facts.unclamped_targets(raw_action))
    clamped = cut > CLAMP_TOLERANCE_RAD
    largest = np.where(clamped, cut, 0.0).max(axis=0) if len(cut) else np.zeros(len(facts.driven))
    return ClampCounts(tuple(joint_names), len(cut), int(clamped.any(axis=1).sum()),
                       tuple(int(n) for n in clamped.sum(axis=0)), tuple(float(m) for m in largest))  # fmt: skip


def clamp_lines(counts: dict) -> list[str]:
    """Console lines of :meth:`ClampCounts.to_dict`: the total, then each clamped joint, most often first."""
    lines = [f"targets clamped to the joint limits: {counts['clamped_ticks']} of {counts['ticks']} ticks"]
    joints = sorted(counts["joints"].items(), key=lambda item: -item[1]["ticks"])
    return lines + [f"  {name:<28} {c['ticks']:>5} ticks, up to {c['max_rad']:.3f} rad" for name, c in joints]
