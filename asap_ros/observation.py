"""The actor's observation, laid out exactly as in training.

Terms are concatenated in alphabetical order of their names; each is ``scale * value``. The
history block holds, per history term (alphabetical), the last ``length`` scaled values,
newest first ``[t-1, t-2, ...]``; it is zero after :meth:`ObservationBuilder.reset` and is
pushed *after* the current observation has been built.

Terms come from a registry (:data:`TERMS`) keyed by name, so a different layout is a new spec,
not new code. :meth:`ObservationBuilder.build` works in buffers allocated once per builder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from asap_ros.errors import ConfigError
from asap_ros.policy_spec import PolicySpec
from asap_ros.state import RobotState


class StepInputs:
    """What the terms of one control step are computed from."""

    __slots__ = ("state", "last_action", "phase", "driven", "default_driven")

    def __init__(self, spec: PolicySpec):
        self.state = RobotState()
        self.last_action = np.zeros(len(spec.driven_joints), dtype=np.float32)
        self.phase = 0.0
        self.driven = spec.driven_indices
        self.default_driven = spec.default_q[spec.driven_indices]


@dataclass(frozen=True)
class TermDef:
    """How to compute one term: its dimension for a spec, and a writer of its unscaled value."""

    dim: Callable[[PolicySpec], int]
    write: Callable[[StepInputs, np.ndarray], None]


def _actions(inputs: StepInputs, out: np.ndarray) -> None:
    out[:] = inputs.last_action


def _base_ang_vel(inputs: StepInputs, out: np.ndarray) -> None:
    out[:] = inputs.state.gyro


def _dof_pos(inputs: StepInputs, out: np.ndarray) -> None:
    inputs.state.q.take(inputs.driven, out=out)
    out -= inputs.default_driven


def _dof_vel(inputs: StepInputs, out: np.ndarray) -> None:
    inputs.state.dq.take(inputs.driven, out=out)


def _projected_gravity(inputs: StepInputs, out: np.ndarray) -> None:
    """World gravity direction (0, 0, -1) in the body frame: R(q)^T g, q = (w, x, y, z)."""
    w, x, y, z = inputs.state.quat_wxyz
    out[0] = 2.0 * (w * y - x * z)
    out[1] = -2.0 * (w * x + y * z)
    out[2] = 1.0 - 2.0 * (w * w + z * z)


def _ref_motion_phase(inputs: StepInputs, out: np.ndarray) -> None:
    out[0] = inputs.phase


def _num_driven(spec: PolicySpec) -> int:
    return len(spec.driven_joints)


TERMS: dict[str, TermDef] = {
    "actions": TermDef(_num_driven, _actions),
    "base_ang_vel": TermDef(lambda spec: 3, _base_ang_vel),
    "dof_pos": TermDef(_num_driven, _dof_pos),
    "dof_vel": TermDef(_num_driven, _dof_vel),
    "projected_gravity": TermDef(lambda spec: 3, _projected_gravity),
    "ref_motion_phase": TermDef(lambda spec: 1, _ref_motion_phase),
}
"""Registry of observation terms by name (the names ASAP's training configs use)."""


class ObservationBuilder:
    """Builds the float32 observation vector for a :class:`PolicySpec`.

    Raw term values are written into a float64 vector laid out like the observation and scaled
    into the float32 observation in one operation (float64 product rounded once, as in
    training). The history is a ``[length, H]`` float32 table of scaled values (row 0 newest),
    gathered into its block in one operation and shifted by one row per step.
    """

    def __init__(self, spec: PolicySpec):
        self.spec = spec
        self._check_terms(spec)
        layout = {s.name: s for s in spec.layout}
        self.obs = np.zeros(spec.input_dim, dtype=np.float32)
        self._raw = np.zeros(spec.input_dim, dtype=np.float64)
        self._scale = np.ones(spec.input_dim, dtype=np.float64)
        self._writers = []
        for term in spec.terms:
            block = slice(layout[term.name].offset, layout[term.name].offset + term.dim)
            self._scale[block] = term.scale
            self._writers.append((TERMS[term.name].write, self._raw[block]))
        self._inputs = StepInputs(spec)
        history = spec.history
        if history is None:
            self._history = None
            return
        # columns of one history row: the current (scaled) values of the history terms
        self._row_sources = np.concatenate(
            [np.arange(layout[n].offset, layout[n].offset + layout[n].dim) for n in history.terms]
        )
        self._history = np.zeros((history.length, self._row_sources.size), dtype=np.float32)
        self._history_in_obs = self.obs[layout[history.name].offset : layout[history.name].offset + spec.history_dim]
        self._history_gather = self._gather_index(spec)

    @staticmethod
    def _check_terms(spec: PolicySpec) -> None:
        for term in spec.terms:
            key = f"observation.terms.{term.name}"
            if term.name not in TERMS:
                raise ConfigError(spec.source, key, f"unknown observation term (known: {', '.join(TERMS)})", term.name)
            expected = TERMS[term.name].dim(spec)
            if term.dim != expected:
                problem = f"must be {expected} for {len(spec.driven_joints)} driven joints"
                raise ConfigError(spec.source, f"{key}.dim", problem, term.dim)

    def _gather_index(self, spec: PolicySpec) -> np.ndarray:
        """Flat indices into the history table giving the block's order: per term, per step."""
        history = spec.history
        steps = range(history.length) if history.newest_first else range(history.length - 1, -1, -1)
        width, column, index = self._history.shape[1], 0, []
        for name in history.terms:
            dim = spec.term(name).dim
            for step in steps:
                index.extend(step * width + column + d for d in range(dim))
            column += dim
        return np.array(index, dtype=np.int64)

    def reset(self) -> None:
        """Forget the history (all zeros), as after an environment reset in training."""
        if self._history is not None:
            self._history[:] = 0.0

    def build(self, state: RobotState, last_action: np.ndarray, phase: float) -> np.ndarray:
        """Observation for this step, then push this step's terms into the history.

        ``last_action`` is the previous raw (clipped) actor output in driven-joint order.
        Returns the builder's own buffer, overwritten by the next call: copy it to keep it.
        """
        inputs = self._inputs
        inputs.state = state
        inputs.last_action = last_action
        inputs.phase = phase
        for write, out in self._writers:
            write(inputs, out)
        np.multiply(self._raw, self._scale, out=self.obs)
        if self._history is not None:
            self._history.take(self._history_gather, out=self._history_in_obs)
            self._history[1:] = self._history[:-1]
            self.obs.take(self._row_sources, out=self._history[0])
        return self.obs
