"""Policy specs (``policies/<name>.yaml``): everything needed to run one ONNX actor.

A spec names the actor file and its SHA-256, the ONNX input/output, the driven joints, the
observation layout (terms with dim and scale, concatenated in alphabetical order of their
names, plus one history block), the action scale and clip, gains and default pose overrides,
the phase clock and the PREPARE pose. A different observation layout is a new spec, not new code.

Two kinds of actor share this format:

- a motion-tracking actor names a clip (``phase.clip``) and a ``prepare`` pose: its phase runs
  from 0 to 1 over the clip and the motion is over when it reaches 1;
- a standing actor (ASAP's decoupled locomotion actor with zero velocity commands) names no
  clip: it runs until it is switched off. Its observation may hold the constant ``commands``
  and the ``reference`` pose of the joints it does not drive (the upper body), which those
  joints hold; ``observed_joints`` lets its dof_pos/dof_vel terms cover all motors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class ObsTerm:
    """One observation term: ``scale`` times its raw value, ``dim`` floats."""

    name: str
    dim: int
    scale: float


@dataclass(frozen=True)
class HistorySpec:
    """The history block: ``length`` past steps of each term in ``terms`` (alphabetical)."""

    name: str
    length: int
    terms: tuple[str, ...]
    newest_first: bool


@dataclass(frozen=True)
class ObsSlice:
    """Where one block sits in the observation vector."""

    name: str
    offset: int
    dim: int


@dataclass(frozen=True)
class StandingCommands:
    """The constant commands a standing actor observes (ASAP's locomotion commands, unscaled).

    ``stand`` is ASAP's ``command_stand``: 0 is stance, where ASAP's gait phase stays at 0
    (``phase_time = (t * stand) % period / period``), so ``sin_phase`` is 0 and ``cos_phase`` 1.
    """

    lin_vel: tuple[float, float]
    ang_vel: float
    stand: float
    base_height: float

    @property
    def gait_phase(self) -> float:
        """ASAP's ``phase_time`` in [0, 1): 0 in stance."""
        return 0.0


@dataclass(frozen=True)
class PolicySpec:
    """A validated policy spec; arrays are in G1 motor order unless named ``driven``."""

    name: str
    source: Path
    """The spec file (named in every error)."""
    actor_path: Path
    actor_sha256: str
    input_name: str
    input_dim: int
    output_name: str
    output_dim: int
    driven_joints: tuple[str, ...]
    driven_indices: np.ndarray
    observed_joints: tuple[str, ...]
    """Joints of the dof_pos/dof_vel terms, in their order (the driven joints unless set)."""
    observed_indices: np.ndarray
    reference_joints: tuple[str, ...]
    """Joints of the ``ref_upper_dof_pos`` term (empty unless the spec has a ``reference``)."""
    reference_indices: np.ndarray
    snap_indices: np.ndarray
    """Reference joints whose target jumps to the reference pose when the actor takes over
    instead of blending (motor indices; ASAP zeroes waist roll and pitch on that switch)."""
    commands: StandingCommands | None
    terms: tuple[ObsTerm, ...]
    """Current-step terms, sorted by name."""
    history: HistorySpec | None
    action_scale: float
    action_clip: float
    default_q: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    control_dt: float
    phase_start: float
    clip_path: Path | None
    """The tracked clip; ``None`` for a standing actor."""
    clip_duration_s: float
    """``(N - 1) / fps`` of the tracked clip: the phase reaches 1 after this time (a standing
    actor: infinite, its phase stays 0 and it is never done)."""
    prepare_pose: np.ndarray
    """[29] pose PREPARE blends to; non-driven joints hold it while the actor runs (a standing
    actor: the default pose with its ``reference`` pose)."""
    prepare_blend_s: float
    prepare_hold_s: float

    @property
    def is_motion(self) -> bool:
        """A motion-tracking actor (it has a clip), not a standing one."""
        return self.clip_path is not None

    @property
    def layout(self) -> tuple[ObsSlice, ...]:
        """Every block of the observation (terms and history) in order, with offsets."""
        blocks = [(t.name, t.dim) for t in self.terms]
        if self.history is not None:
            blocks.append((self.history.name, self.history_dim))
        slices, offset = [], 0
        for name, dim in sorted(blocks):
            slices.append(ObsSlice(name, offset, dim))
            offset += dim
        return tuple(slices)

    @property
    def history_dim(self) -> int:
        if self.history is None:
            return 0
        return self.history.length * sum(self.term(n).dim for n in self.history.terms)

    def term(self, name: str) -> ObsTerm:
        return next(t for t in self.terms if t.name == name)
