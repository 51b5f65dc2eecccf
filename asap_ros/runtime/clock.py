"""The runtime's two clocks, passed in so that tests can step one of them.

``monotonic_ns`` times every duration and deadline (blends, stand-up, state age, late steps);
``time_ns`` (ROS system time) only stamps data that is recorded or published. A step of the
system clock (NTP, an operator setting the date) therefore changes no command.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Clock:
    monotonic_ns: Callable[[], int] = time.monotonic_ns
    """Durations and deadlines."""
    time_ns: Callable[[], int] = time.time_ns
    """Stamps of recorded data (system time)."""


SYSTEM_CLOCK = Clock()
