"""Which actor steps pair into the rows of the trainer formats.

Actor step k of an episode holds the state the actor saw (S_k), its observation and the action
computed from it (a_k); the robot then moved to S_k+1, which step k+1 saw. A transition is the
pair (k, k+1) of consecutive ticks; ASAP saves it after the physics step as one row
(S_k+1, a_k) (``humanoidverse/envs/motion_tracking/motion_tracking.py``, ``_post_physics_step``),
the ``delta`` format as (S_k, a_k, S_k+1).

A step on which a fault latched sent the damping command, not its action (which may be NaN):
it is never the action of a transition. Its state is real (the robot reached it under a_k-1),
so it ends the last transition, flagged ``terminate`` like the step ASAP's ``reset_buf`` ends.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asap_ros.export.align import AlignedEpisode


@dataclass(frozen=True)
class Transitions:
    """Transitions of one episode: indices into its actor steps."""

    action: np.ndarray
    """(N,) the step whose action the transition applies (k)."""
    result: np.ndarray
    """(N,) the step that saw the state it led to (k + 1)."""
    terminate: np.ndarray
    """(N,) int64: 1 on the transition into the episode's last state, when the episode ended there
    (the motion finished, or a stop, e-stop or fault ended it); 0 when the recording stopped first."""
    left_out: int
    """Actor steps after the first missing tick, left out of a continuous timeline (else 0)."""

    def __len__(self) -> int:
        return len(self.action)


def transitions(aligned: AlignedEpisode, continuous: bool) -> Transitions:
    """Every one-step transition of ``aligned``; ``continuous``: only those before the first missing
    tick (a clip's rows are frames at the control rate, and a hole would shift every later one)."""
    tick, faulted = aligned.tick, aligned.episode.steps.fault_latched
    joined = (np.diff(tick) == 1) & ~faulted[:-1]
    k = np.flatnonzero(joined)
    last, left_out = len(tick) - 1, 0
    breaks = np.flatnonzero(~joined)
    if continuous and len(breaks):
        k = k[k < breaks[0]]
        left_out = last - int(breaks[0])
    return Transitions(k, k + 1, ((k + 1 == last) & aligned.episode.ended).astype(np.int64), left_out)
