"""Running one job per bag on all cores (``-j``), collecting results and per-bag errors."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from asap_ros.core.errors import AsapError
from asap_ros.export.progress import Progress

R = TypeVar("R")


@dataclass(frozen=True)
class BagOutcome(Generic[R]):
    """A job's result for one bag, or the error that stopped it."""

    bag: Path
    result: R | None
    error: str | None


def default_jobs() -> int:
    """All cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_per_bag(job: Callable[[Path], R], bags: Sequence[Path], jobs: int, label: str) -> list[BagOutcome[R]]:
    """``job(bag)`` for every bag, in ``jobs`` processes (1: in this process), in input order.

    ``job`` must be picklable (a module-level function or ``functools.partial`` of one). An
    :class:`AsapError` stops only its own bag and is reported with it.
    """
    if jobs <= 1 or len(bags) == 1:
        return [_guarded(job, bag) for bag in bags]
    outcomes: dict[Path, BagOutcome[R]] = {}
    with Progress(len(bags), label, "bags") as progress, ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_guarded, job, bag): bag for bag in bags}
        for future in as_completed(futures):
            outcomes[futures[future]] = future.result()
            progress.advance()
    return [outcomes[bag] for bag in bags]


def _guarded(job: Callable[[Path], R], bag: Path) -> BagOutcome[R]:
    try:
        return BagOutcome(bag, job(bag), None)
    except AsapError as exc:
        return BagOutcome(bag, None, str(exc))
