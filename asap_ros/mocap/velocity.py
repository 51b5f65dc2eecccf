"""Twist from consecutive poses: finite differences smoothed by an exponential moving average.

The caller says how much time separates a pose from the previous one, or that there is a
discontinuity (dropped frame, occlusion, out-of-range interval): then the estimator restarts
and never differentiates across the gap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asap_ros.core.quaternion import quat_conjugate, quat_multiply, quat_rotate, quat_to_rotvec


@dataclass(frozen=True)
class Twist:
    """Velocity of the tracked body."""

    linear_world: np.ndarray
    """m/s, world frame."""
    linear_body: np.ndarray
    """m/s, body frame (nav_msgs/Odometry twist convention)."""
    angular_body: np.ndarray
    """rad/s, body frame."""


class VelocityEstimator:
    """EMA-filtered finite-difference velocity; ``alpha`` = weight of the newest difference."""

    def __init__(self, alpha: float):
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"velocity filter alpha must be in (0, 1], got {alpha}")
        self.alpha = alpha
        self.resets = 0
        self._previous: tuple[np.ndarray, np.ndarray] | None = None
        self._linear: np.ndarray | None = None
        self._angular: np.ndarray | None = None

    def reset(self) -> None:
        """Forget the previous pose and the filter state."""
        self._previous = None
        self._linear = None
        self._angular = None

    def update(self, position: np.ndarray, quat_wxyz: np.ndarray, dt_s: float | None) -> Twist | None:
        """Add a pose ``dt_s`` after the previous one (``None``: discontinuity).

        Returns the filtered twist, or ``None`` when there is no previous pose to difference.
        """
        position = np.asarray(position, dtype=np.float64)
        quat = np.asarray(quat_wxyz, dtype=np.float64)
        if dt_s is None or dt_s <= 0.0:
            if self._previous is not None:
                self.resets += 1
            self.reset()
        previous, self._previous = self._previous, (position, quat)
        if previous is None:
            return None
        linear = (position - previous[0]) / dt_s
        angular = quat_to_rotvec(quat_multiply(quat_conjugate(previous[1]), quat)) / dt_s
        if self._linear is None:
            self._linear, self._angular = linear, angular
        else:
            self._linear = self._linear + self.alpha * (linear - self._linear)
            self._angular = self._angular + self.alpha * (angular - self._angular)
        return Twist(
            linear_world=self._linear,
            linear_body=quat_rotate(quat_conjugate(quat), self._linear),
            angular_body=self._angular,
        )
