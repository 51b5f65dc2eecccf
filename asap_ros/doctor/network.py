"""The robot's network from this computer: the interface, its link and address, socket buffers."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from pathlib import Path

from asap_ros.doctor.report import Check, fail, ok, warn
from asap_ros.recording.dds_source import RMEM_MAX, rmem_max_fix, rmem_max_shortfall

SYS_NET = Path("/sys/class/net")


def _interface_info(interface: str) -> dict | None:
    """``ip -j -4 addr`` of one interface; ``None`` when it does not exist."""
    result = subprocess.run(["ip", "-j", "-4", "addr", "show", "dev", interface],
                            capture_output=True, text=True, timeout=5)  # fmt: skip
    if result.returncode != 0:
        return None
    entries = json.loads(result.stdout or "[]")
    return entries[0] if entries else None


def check_interface(interface: str, subnet: ipaddress.IPv4Network) -> list[Check]:
    """The interface exists, its link is up and it has an address on ``subnet``."""
    name = f"network {interface}"
    try:
        info = _interface_info(interface)
    except FileNotFoundError:
        return [warn(name, "cannot read interfaces: the `ip` command (iproute2) is missing", "apt install iproute2")]
    if info is None:
        known = ", ".join(sorted(p.name for p in SYS_NET.iterdir())) if SYS_NET.is_dir() else "?"
        return [fail(name, f"no interface {interface!r} (this computer has: {known})",
                     "pass --interface with the NIC wired to the robot (`ip -br addr` lists them)")]  # fmt: skip
    flags = set(info.get("flags", []))
    if "UP" not in flags:
        return [fail(name, f"{interface} is down", f"sudo ip link set {interface} up")]
    if "LOWER_UP" not in flags and "LOOPBACK" not in flags:
        return [fail(name, f"{interface} is up but has no link (cable, switch or robot powered off?)",
                     "check the Ethernet cable to the robot and that the robot is on")]  # fmt: skip
    addresses = [ipaddress.IPv4Interface(f"{a['local']}/{a['prefixlen']}") for a in info.get("addr_info", [])]
    on_subnet = [a for a in addresses if a.ip in subnet]
    if not on_subnet:
        have = ", ".join(map(str, addresses)) or "none"
        example = next(iter(subnet.hosts()), subnet.network_address) if subnet.num_addresses > 2 else subnet.network_address
        return [fail(name, f"{interface} has no IPv4 address on the robot's subnet {subnet} (it has: {have})",
                     f"give it a static address there, e.g. sudo ip addr add {example + 221}/{subnet.prefixlen} "
                     f"dev {interface} (the G1 uses 192.168.123.0/24; --subnet changes it)")]  # fmt: skip
    return [ok(name, f"up, {', '.join(map(str, on_subnet))} on {subnet}")]


def check_receive_buffer(receive_buffer_bytes: int) -> list[Check]:
    """``net.core.rmem_max`` lets the recorder's DDS sockets have the buffer it asks for."""
    name = "network rmem_max"
    if not RMEM_MAX.exists():
        return [warn(name, f"{RMEM_MAX} not readable: cannot tell the socket buffer limit", "run on Linux")]
    shortfall = rmem_max_shortfall(receive_buffer_bytes)
    if shortfall:
        return [warn(name, shortfall, f"sudo {rmem_max_fix(receive_buffer_bytes)} (persist it in /etc/sysctl.d/)")]
    return [ok(name, f"net.core.rmem_max {RMEM_MAX.read_text().strip()} bytes >= the recorder's "
                     f"{receive_buffer_bytes} bytes (receive_buffer_mb)")]  # fmt: skip
