"""Subcommands of ``asap-ros``; see :mod:`asap_ros.cli`."""
