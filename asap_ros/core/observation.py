"""The actor's observation, laid out exactly as in training.

Terms are concatenated in alphabetical order of their names; each is ``scale * value``. The
history block holds, per history term (alphabetical), the last ``length`` scaled values,
newest first ``[t-1, t-2, ...]``; it is zero after :meth:`ObservationBuilder.reset` and is
pushed *after* the current observation has been built.

Terms come from a registry (:data:`TERMS`) keyed by name, so a different layout is a new spec,
not new code. :meth:`ObservationBuilder.build` works in buffers allocated once per builder.

The standing actor's terms (ASAP's decoupled locomotion actor): ``command_*`` are the spec's
constant :class:`~asap_ros.config.policy_spec.StandingCommands`, ``sin_phase``/``cos_phase`` its gait
phase (0 in stance), ``ref_upper_dof_pos`` the current targets of the spec's reference joints
(the reference pose passed to :meth:`ObservationBuilder.build`, absolute joint angles).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.core.policy_spec import PolicySpec, StandingCommands
from asap_ros.core.quaternion import gravity_in_body
from asap_ros.core.state import RobotState


class StepInputs:
    """What the terms of one control step are computed from."""

    __slots__ = ("state", "last_action", "phase", "observed", "default_observed", "reference", "spec")

    def __init__(self, spec: PolicySpec):
        self.spec = spec
        self.state = RobotState()
        self.last_action = np.zeros(len(spec.driven_joints), dtype=np.float32)
        self.phase = 0.0
        self.observed = spec.observed_indices
        self.default_observed = spec.default_q[spec.observed_indices]
        self.reference = spec.prepare_pose
        """[29] motor-order targets of the joints the actor does not drive."""


@dataclass(frozen=True)
class TermDef:
    """How to compute one term: its dimension for a spec, and a writer of its unscaled value.

    ``needs`` names the spec section the term reads (``commands`` or ``reference``).
    """

    dim: Callable[[PolicySpec], int]
    write: Callable[[StepInputs, np.ndarray], None]
    needs: str | None = None


def _commands(inputs: StepInputs) -> StandingCommands:
    commands = inputs.spec.commands
    assert commands is not None  # the builder refuses command terms in a spec without ``commands``
    return commands


def _actions(inputs: StepInputs, out: np.ndarray) -> None:
    out[:] = inputs.last_action


def _base_ang_vel(inputs: StepInputs, out: np.ndarray) -> None:
    out[:] = inputs.state.gyro


def _command_lin_vel(inputs: StepInputs, out: np.ndarray) -> None:
    out[:] = _commands(inputs).lin_vel


def _command_ang_vel(inputs: StepInputs, out: np.ndarray) -> None:
    out[0] = _commands(inputs).ang_vel


def _command_stand(inputs: StepInputs, out: np.ndarray) -> None:
    out[0] = _commands(inputs).stand


def _command_base_height(inputs: StepInputs, out: np.ndarray) -> None:
    out[0] = _commands(inputs).base_height


def _sin_phase(inputs: StepInputs, out: np.ndarray) -> None:
    out[0] = math.sin(2.0 * math.pi * _commands(inputs).gait_phase)


def _cos_phase(inputs: StepInputs, out: np.ndarray) -> None:
    out[0] = math.cos(2.0 * math.pi * _commands(inputs).gait_phase)


def _dof_pos(inputs: StepInputs, out: np.ndarray) -> None:
    inputs.state.q.take(inputs.observed, out=out)
    out -= inputs.default_observed


def _dof_vel(inputs: StepInputs, out: np.ndarray) -> None:
    inputs.state.dq.take(inputs.observed, out=out)


def _projected_gravity(inputs: StepInputs, out: np.ndarray) -> None:
    """World gravity direction (0, 0, -1) in the body frame: R(q)^T g, q = (w, x, y, z)."""
    gravity_in_body(inputs.state.quat_wxyz, out)


def _ref_motion_phase(inputs: StepInputs, out: np.ndarray) -> None:
    out[0] = inputs.phase


def _ref_upper_dof_pos(inputs: StepInputs, out: np.ndarray) -> None:
    inputs.reference.take(inputs.spec.reference_indices, out=out)


def _num_driven(spec: PolicySpec) -> int:
    return len(spec.driven_joints)


def _num_observed(spec: PolicySpec) -> int:
    return len(spec.observed_joints)


def _num_reference(spec: PolicySpec) -> int:
    return len(spec.reference_joints)


def _command(dim: int, write: Callable[[StepInputs, np.ndarray], None]) -> TermDef:
    return TermDef(lambda spec: dim, write, needs="commands")


TERMS: dict[str, TermDef] = {
    "actions": TermDef(_num_driven, _actions),
    "base_ang_vel": TermDef(lambda spec: 3, _base_ang_vel),
    "command_ang_vel": _command(1, _command_ang_vel),
    "command_base_height": _command(1, _command_base_height),
    "command_lin_vel": _command(2, _command_lin_vel),
    "command_stand": _command(1, _command_stand),
    "cos_phase": _command(1, _cos_phase),
    "dof_pos": TermDef(_num_observed, _dof_pos),
    "dof_vel": TermDef(_num_observed, _dof_vel),
    "projected_gravity": TermDef(lambda spec: 3, _projected_gravity),
    "ref_motion_phase": TermDef(lambda spec: 1, _ref_motion_phase),
    "ref_upper_dof_pos": TermDef(_num_reference, _ref_upper_dof_pos, needs="reference"),
    "sin_phase": _command(1, _sin_phase),
}
"""Registry of observation terms by name (the names ASAP's training configs use)."""

_SPEC_HAS = {
    "commands": lambda spec: spec.commands is not None,
    "reference": lambda spec: len(spec.reference_joints) > 0,
}


class ObservationBuilder:
    """Builds the float32 observation vector for a :class:`PolicySpec`.

    Raw term values are written into a float64 vector laid out like the observation and scaled
    into the float32 observation in one operation (float64 product rounded once, as in
    training). The history is a ring of ``length`` rows of scaled float32 values: gathered
    into its block in one operation (an index per position of the newest row), then this
    step's row overwrites the oldest.
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
        self._next_row = 0
        """Row the next push overwrites: the oldest step's."""
        self._history_in_obs = self.obs[layout[history.name].offset : layout[history.name].offset + spec.history_dim]
        self._history_gathers = [self._gather_index(spec, next_row) for next_row in range(history.length)]

    @staticmethod
    def _check_terms(spec: PolicySpec) -> None:
        for term in spec.terms:
            key = f"observation.terms.{term.name}"
            if term.name not in TERMS:
                raise ConfigError(spec.source, key, f"unknown observation term (known: {', '.join(TERMS)})", term.name)
            needs = TERMS[term.name].needs
            if needs is not None and not _SPEC_HAS[needs](spec):
                raise ConfigError(spec.source, key, f"needs the spec's {needs} section", term.name)
            expected = TERMS[term.name].dim(spec)
            if term.dim != expected:
                problem = (
                    f"must be {expected} for {len(spec.driven_joints)} driven, {len(spec.observed_joints)} observed "
                    f"and {len(spec.reference_joints)} reference joints"
                )
                raise ConfigError(spec.source, f"{key}.dim", problem, term.dim)

    def _gather_index(self, spec: PolicySpec, next_row: int) -> np.ndarray:
        """Flat indices into the history ring giving the block's order (per term, per step) while
        ``next_row`` holds the oldest step."""
        history, ring = spec.history, self._history
        assert history is not None and ring is not None  # called only for a spec with a history
        ages = range(history.length) if history.newest_first else range(history.length - 1, -1, -1)
        width, column = ring.shape[1], 0
        index: list[int] = []
        for name in history.terms:
            dim = spec.term(name).dim
            for age in ages:  # age 0: the previous step
                row = (next_row - 1 - age) % history.length
                index.extend(row * width + column + d for d in range(dim))
            column += dim
        return np.array(index, dtype=np.int64)

    def reset(self) -> None:
        """Forget the history (all zeros), as after an environment reset in training."""
        if self._history is not None:
            self._history[:] = 0.0
            self._next_row = 0

    def build(
        self, state: RobotState, last_action: np.ndarray, phase: float, reference: np.ndarray | None = None
    ) -> np.ndarray:
        """Observation for this step, then push this step's terms into the history.

        ``last_action`` is the previous raw (clipped) actor output in driven-joint order;
        ``reference`` the [29] motor-order targets of the joints the actor does not drive
        (default: the spec's ``prepare_pose``). Returns the builder's own buffer, overwritten by
        the next call: copy it to keep it.
        """
        inputs = self._inputs
        inputs.state = state
        inputs.last_action = last_action
        inputs.phase = phase
        inputs.reference = self.spec.prepare_pose if reference is None else reference
        for write, out in self._writers:
            write(inputs, out)
        np.multiply(self._raw, self._scale, out=self.obs)
        if self._history is not None:
            row = self._next_row
            self._history.take(self._history_gathers[row], out=self._history_in_obs)
            self.obs.take(self._row_sources, out=self._history[row])
            self._next_row = (row + 1) % len(self._history)
        return self.obs
