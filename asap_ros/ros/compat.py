"""The one place where rclpy 7 (ROS 2 Jazzy) and rclpy 9 (Kilted) differ for asap_ros."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

__all__ = ["RCLPY_DISTROS", "describe", "rclpy_version", "ros_distro", "setup_distro"]

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
