"""The share of the closable gap a delta closes, and whether a motion's gap is measurable at all.

An open-loop replay of a nominal recording does not land on it (the floor, E_floor: the reset,
the integration, the open loop's amplification); a delta can only close what lies above that.
Per motion and horizon, with E the mean E_g-mpjpe over the motion's windows (mm):

- ``S = (E_none − E_delta) / (E_none − E_floor)``: 1 closes all that can be closed, 0 nothing;
- ``R = E_none / E_floor``: the measurability; below :data:`MIN_MEASURABLE_RATIO` the defect is
  not told apart from the floor and the cell is reported "not measurable", not passed or failed.

E_floor comes from the same motion replayed on a robot without the defect: nominal recordings of
it (``--floor``), or the recording itself replayed by a simulator given the true defect
(``--profile``, simulated data only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asap_ros.export.openloop import HORIZONS_S, PHYSICS_RATE, WITH, WITHOUT, OpenLoopResult

METRIC = "g_mpjpe_mm"
MIN_MEASURABLE_RATIO = 2.0
"""A cell counts only where ``E_none / E_floor`` reaches this (the issue's acceptance rule)."""
NOT_MEASURABLE = "not measurable"


@dataclass(frozen=True)
class ClosableCell:
    """One motion at one horizon (errors in mm)."""

    e_none: float
    e_delta: float | None
    e_floor: float | None
    e_physics_rate: float | None = None
    """With the delta recomputed every physics step (``--physics-rate-delta``)."""

    @property
    def ratio(self) -> float | None:
        """R = E_none / E_floor (``None`` without a floor)."""
        if self.e_floor is None:
            return None
        return self.e_none / self.e_floor if self.e_floor > 0 else float("inf")

    @property
    def measurable(self) -> bool:
        return self.ratio is not None and self.ratio >= MIN_MEASURABLE_RATIO

    def share_of(self, e_delta: float | None) -> float | None:
        """S of a replay's error, or ``None`` without one, without a floor or where nothing is closable
        (E_none <= E_floor)."""
        if e_delta is None or self.e_floor is None or self.e_none <= self.e_floor:
            return None
        return (self.e_none - e_delta) / (self.e_none - self.e_floor)

    @property
    def share(self) -> float | None:
        """S of the delta applied per policy step (the trainer's)."""
        return self.share_of(self.e_delta)

    def to_dict(self) -> dict:
        return {"e_none_mm": self.e_none, "e_delta_mm": self.e_delta, "e_floor_mm": self.e_floor, "R": self.ratio,
                "S": self.share, "measurable": self.measurable, "e_physics_rate_mm": self.e_physics_rate,
                "S_physics_rate": self.share_of(self.e_physics_rate)}  # fmt: skip


def motion_means(result: OpenLoopResult, column: str, horizon: float) -> dict[str, float]:
    """Motion -> mean E_g-mpjpe (mm) of ``column`` over its windows."""
    motions = sorted({w.motion for w in result.windows if column in w.scores})
    return {m: float(np.mean([w.scores[column].metrics[horizon][METRIC] for w in result.windows if w.motion == m]))
            for m in motions}  # fmt: skip


def closable_gap(result: OpenLoopResult, floor: OpenLoopResult | None,
                 horizons: Sequence[float] = HORIZONS_S) -> dict[str, dict[float, ClosableCell]]:  # fmt: skip
    """Motion -> horizon -> cell; ``floor``: the nominal replays (their ``without`` column) of the same motions."""
    cells: dict[str, dict[float, ClosableCell]] = {}
    for horizon in horizons:
        none = motion_means(result, WITHOUT, horizon)
        delta = motion_means(result, WITH, horizon)
        physics = motion_means(result, PHYSICS_RATE, horizon)
        floors = motion_means(floor, WITHOUT, horizon) if floor is not None else {}
        for motion, e_none in none.items():
            cells.setdefault(motion, {})[horizon] = ClosableCell(e_none, delta.get(motion), floors.get(motion),
                                                                 physics.get(motion))  # fmt: skip
    return cells


def to_dict(cells: dict[str, dict[float, ClosableCell]], floor_source: str | None) -> dict:
    """The JSON entry ``closable_gap``."""
    return {"metric": METRIC, "floor": floor_source, "min_ratio": MIN_MEASURABLE_RATIO,
            "motions": {m: {f"{h:g}": c.to_dict() for h, c in by.items()} for m, by in cells.items()}}  # fmt: skip


def _number(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def text_lines(summary: dict) -> list[str]:
    """The table of :func:`to_dict`'s figures: per motion and horizon E_none, E_delta, E_floor, R and S."""
    lines = [f"closable gap per motion (E_g-mpjpe mm; floor: {summary['floor'] or 'none given (--floor / --profile)'}; "
             f"S = (E_none − E_delta) / (E_none − E_floor), R = E_none / E_floor, R < {summary['min_ratio']:g}: "
             f"{NOT_MEASURABLE}; S physics rate: the delta recomputed every physics step)",
             "| motion | horizon | E_none | E_delta | E_floor | R | S | S physics rate |", "|---|---|---|---|---|---|---|---|"]
    for motion, by in summary["motions"].items():
        for horizon, c in by.items():
            shares = [_number(c[key]) for key in ("S", "S_physics_rate")]
            if c["e_floor_mm"] is not None and not c["measurable"]:
                shares = [NOT_MEASURABLE] * 2
            lines.append(f"| {motion} | {horizon} s | {c['e_none_mm']:.2f} | {_number(c['e_delta_mm'])} | "
                         f"{_number(c['e_floor_mm'])} | {_number(c['R'], 1)} | {' | '.join(shares)} |")  # fmt: skip
    return lines
