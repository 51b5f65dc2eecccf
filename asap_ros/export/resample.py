"""Resampling of recorded streams onto the control ticks.

Every stream is a sorted array of source stamps (ns) with one value row per stamp. At each
target time the value is interpolated between the two samples around it (positions and
joint angles linearly, rotations by slerp). The *synchronisation error* of a target is the
time to the nearest sample of the stream: 0 when a sample lies exactly on the tick, half the
sample period at worst inside a gap-free stream. Targets outside the stream's time span
take the end sample and count as errors of that distance too, so nothing is silently
extrapolated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asap_ros.core.quaternion import quat_slerp


@dataclass(frozen=True)
class Bracket:
    """For each target time: the samples before/after it and the interpolation weight."""

    lower: np.ndarray  # (T,) int
    upper: np.ndarray  # (T,) int
    fraction: np.ndarray  # (T,) in [0, 1]
    sync_error_ns: np.ndarray  # (T,) int64, time to the nearest sample


def bracket(stamps_ns: np.ndarray, targets_ns: np.ndarray) -> Bracket:
    """Where each target falls in the sorted ``stamps_ns`` (at least one sample needed)."""
    stamps = np.asarray(stamps_ns, dtype=np.int64)
    targets = np.asarray(targets_ns, dtype=np.int64)
    if stamps.ndim != 1 or stamps.size == 0:
        raise ValueError("a stream needs at least one sample to resample")
    if np.any(np.diff(stamps) < 0):
        raise ValueError("stream stamps must be sorted")
    upper = np.clip(np.searchsorted(stamps, targets, side="left"), 0, stamps.size - 1)
    lower = np.clip(np.searchsorted(stamps, targets, side="right") - 1, 0, stamps.size - 1)
    span = (stamps[upper] - stamps[lower]).astype(np.float64)
    fraction = np.where(span > 0, (targets - stamps[lower]) / np.where(span > 0, span, 1.0), 0.0)
    fraction = np.clip(fraction, 0.0, 1.0)
    error = np.minimum(np.abs(targets - stamps[lower]), np.abs(stamps[upper] - targets))
    return Bracket(lower=lower, upper=upper, fraction=fraction, sync_error_ns=error)


def interpolate(where: Bracket, values: np.ndarray) -> np.ndarray:
    """Linear interpolation of value rows (positions, joint angles, velocities)."""
    values = np.asarray(values, dtype=np.float64)
    f = where.fraction.reshape((-1,) + (1,) * (values.ndim - 1))
    return (1.0 - f) * values[where.lower] + f * values[where.upper]


def slerp(where: Bracket, quats_wxyz: np.ndarray) -> np.ndarray:
    """Spherical interpolation of unit quaternions (w, x, y, z); output hemisphere kept continuous."""
    quats = np.asarray(quats_wxyz, dtype=np.float64)
    quats = quats / np.linalg.norm(quats, axis=1, keepdims=True)
    out = quat_slerp(quats[where.lower], quats[where.upper], where.fraction)
    return continuous_hemisphere(out)


def newest_at(stamps_ns: np.ndarray, targets_ns: np.ndarray) -> np.ndarray:
    """Zero-order hold: index of the newest sample at or before each target (-1: none yet)."""
    return np.searchsorted(np.asarray(stamps_ns), np.asarray(targets_ns), side="right") - 1


def nearest(stamps_ns: np.ndarray, targets_ns: np.ndarray) -> np.ndarray:
    """Index of the sample nearest each target (at least one sample needed)."""
    where = bracket(stamps_ns, targets_ns)
    stamps, targets = np.asarray(stamps_ns, dtype=np.int64), np.asarray(targets_ns, dtype=np.int64)
    lower_is_nearer = np.abs(targets - stamps[where.lower]) <= np.abs(stamps[where.upper] - targets)
    return np.where(lower_is_nearer, where.lower, where.upper)


def continuous_hemisphere(quats: np.ndarray) -> np.ndarray:
    """Flip signs so consecutive quaternions have a positive dot product (same rotations)."""
    quats = np.array(quats, dtype=np.float64)
    if len(quats) > 1:
        flips = np.sum(quats[1:] * quats[:-1], axis=1) < 0.0
        sign = np.concatenate([[1.0], np.where(np.cumsum(flips) % 2 == 1, -1.0, 1.0)])
        quats *= sign[:, None]
    return quats


def local_fit(stamps_ns: np.ndarray, values: np.ndarray, targets_ns: np.ndarray, half_window_ns: int
              ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Value and rate of change (per second) at each target of a least-squares parabola through
    the samples within about ``±half_window_ns`` (the same number on each side).

    Exact for motion of constant acceleration wherever the samples fall; it averages sample
    noise where interpolation passes it on and a finite difference amplifies it.
    """
    stamps = np.asarray(stamps_ns, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64).reshape(len(stamps), -1)
    targets = np.asarray(targets_ns, dtype=np.int64)
    shape = (len(targets), *np.shape(values)[1:])
    if len(stamps) < 2:
        return np.broadcast_to(v[:1], (len(targets), v.shape[1])).reshape(shape), np.zeros(shape)
    period = float(np.median(np.diff(stamps))) or 1.0
    side = max(2, int(round(half_window_ns / period)))
    first_after = np.searchsorted(stamps, targets)
    rows = np.clip(first_after[:, None] + np.arange(-side, side), 0, len(stamps) - 1)
    tau = (stamps[rows] - targets[:, None]) / 1e9
    basis = np.stack([np.ones_like(tau), tau, tau * tau], axis=-1)
    normal = np.einsum("kni,knj->kij", basis, basis)
    normal[:, 2, 2] += 1e-15  # two distinct samples only: the line through them
    coef = np.linalg.solve(normal, np.einsum("kni,knd->kid", basis, v[rows]))
    return coef[:, 0, :].reshape(shape), coef[:, 1, :].reshape(shape)
