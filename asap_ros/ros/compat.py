"""The one place where rclpy 7 (ROS 2 Jazzy) and rclpy 9 (Kilted) differ for asap_ros, and
where asap_ros reaches past rclpy's public API.

What the nodes use of rclpy (``rclpy.init`` with ``signal_handler_options``, ``create_node``,
publishers, subscriptions (raw too), services and clients with ``(request, response)``
callbacks, timers, ``declare_parameter`` with a ``ParameterDescriptor`` and
``add_on_set_parameters_callback``, QoS profiles, ``SingleThreadedExecutor`` /
``MultiThreadedExecutor``, ``ExternalShutdownException``) has the same signatures and behaviour in
rclpy 7.1.6 and 9.1.2; the whole test suite runs on both (.ci/run). What does differ is handled
below: the executor kinds (:func:`make_executor`: ``rclpy.experimental.EventsExecutor`` came to
Jazzy in rclpy 7.1.4 and is missing from Humble's rclpy 3) and the parameter overrides a node was
given (:func:`parameter_overrides`: no public accessor in either). Timer callbacks take no
argument here (rclpy 9 may pass a ``TimerInfo`` to a callback that takes one; 7 never does).
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "EXECUTORS", "RCLPY_DISTROS", "describe", "make_executor", "parameter_overrides", "rclpy_version", "ros_distro",
    "setup_distro",
]

RCLPY_DISTROS = {3: "humble", 7: "jazzy", 9: "kilted"}
"""rclpy's major version -> the ROS 2 distribution that ships it."""


def rclpy_version() -> str:
    """The installed rclpy's version: the ``ros-rclpy`` wheel's (Jazzy's wheel carries an rclpy
    egg-info of 7.1.5 inside ros-rclpy 7.1.6), else a system ROS 2's rclpy's own."""
    for distribution in ("ros-rclpy", "rclpy"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    raise ModuleNotFoundError("rclpy is not installed (neither the ros-rclpy wheel nor a system ROS 2's rclpy)")


def ros_distro() -> str:
    """The ROS 2 distribution of the installed rclpy (``jazzy``, ``kilted``; ``rclpy N.x`` if unknown)."""
    major = int(rclpy_version().split(".")[0])
    return RCLPY_DISTROS.get(major, f"rclpy {major}.x")


def setup_distro() -> str | None:
    """The distribution scripts/setup installed this environment for (its ``asap-ros-distro``
    file, from ``ASAP_ROS_DISTRO``), or None outside such a venv."""
    marker = Path(sys.prefix) / "asap-ros-distro"
    return marker.read_text().strip() if marker.is_file() else None


def describe() -> str:
    """One line for logs: distribution, rclpy and Python versions."""
    python = ".".join(map(str, sys.version_info[:3]))
    return f"ROS 2 {ros_distro()} (rclpy {rclpy_version()}), Python {python}, {sys.prefix}"


EXECUTORS = ("single", "multi", "events")
"""Executor kinds of :func:`make_executor`."""


def make_executor(kind: str, context: Any = None, threads: int | None = None) -> Any:
    """An rclpy executor: ``single`` (SingleThreadedExecutor), ``multi`` (MultiThreadedExecutor of
    ``threads``, default rclpy's CPU count) or ``events`` (rclpy's EventsExecutor where this rclpy
    has one: 9.x, Jazzy from 7.1.4; else SingleThreadedExecutor: the same callbacks on one thread,
    with more Python per message)."""
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

    if kind == "single":
        return SingleThreadedExecutor(context=context)
    if kind == "multi":
        return MultiThreadedExecutor(num_threads=threads, context=context)
    if kind == "events":
        try:
            from rclpy.experimental import EventsExecutor
        except ImportError:
            return SingleThreadedExecutor(context=context)
        return EventsExecutor(context=context)
    raise ValueError(f"executor kind {kind!r}: one of {', '.join(EXECUTORS)} expected")


def parameter_overrides(node: Any) -> dict[str, Any]:
    """Name -> value of every parameter override the node was given (``-p``, ``--params-file``,
    ``parameter_overrides=``), declared or not. rclpy 7 and 9 keep them in the node's
    ``_parameter_overrides`` (name -> ``Parameter``) and publish no accessor."""
    overrides = getattr(node, "_parameter_overrides", None)
    if not isinstance(overrides, dict):
        raise RuntimeError(f"rclpy {rclpy_version()}: Node has no _parameter_overrides dict (asap_ros.ros.compat)")
    return {name: parameter.value for name, parameter in overrides.items()}
