"""DDS domain ids for isolated runs: this process's own, and others beside it (no DDS import)."""

from __future__ import annotations

import os

__all__ = ["DOMAINS", "domain_beside", "process_domain"]

DOMAINS = 90
"""Domain ids :func:`process_domain` picks from (1..90); 91..100 are left for tests that need a
domain apart from every process's own."""


def process_domain() -> int:
    """A DDS domain id (1..90) derived from this process id, for isolated runs and tests. Below 101,
    as ROS 2 advises on Linux: a domain's ports (7400 + 250 x id, 250 of them) then stay under the
    kernel's ephemeral ports (32768 and up), which any process's UDP socket may hold."""
    return 1 + os.getpid() % DOMAINS


def domain_beside(domain: int, offset: int) -> int:
    """The domain ``offset`` places after ``domain`` among 1..:data:`DOMAINS`, wrapping around.
    ``offset`` must not be a multiple of :data:`DOMAINS`: that is ``domain`` itself."""
    if offset % DOMAINS == 0:
        raise ValueError(f"domain offset {offset} is a multiple of {DOMAINS}: it gives domain {domain} itself")
    return 1 + (domain - 1 + offset) % DOMAINS
