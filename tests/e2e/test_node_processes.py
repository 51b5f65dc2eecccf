"""The four nodes as processes (``python -m asap_ros.ros.<module>``), on whichever ROS 2
distribution this venv has: ``--help``; a bad parameter refused with exit 2 on one line naming
the node, the parameter and the value; and for the nodes started by
:func:`asap_ros.ros.node_main.run_node`, misspelt parameters, stray arguments and bad ROS
arguments refused too, SIGINT/SIGTERM ending in a clean exit, the distribution named in the log."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asap_ros.ros.compat import rclpy_version, ros_distro
from asap_ros.ros.fastdds import PROFILE_VARIABLES, TRANSPORTS_VARIABLE
from asap_ros.sim.process import dying_with_this_process

MODULES = {"asap_deploy": "deploy_node", "asap_supervisor": "supervisor_node",
           "asap_recorder": "recorder_node", "asap_mocap": "mocap_node"}
RUN_NODE = ("asap_deploy", "asap_supervisor", "asap_recorder", "asap_mocap")
"""The nodes whose ``main`` is run_node: all four."""
BAD_PARAMETERS = {
    "asap_deploy": ("control_rate_hz:=5000.0", "control_rate_hz", "out of range: allowed 10 <= value <= 500", 5000.0),
    "asap_supervisor": ("lease_ms:=5.0", "lease_ms", "out of range: allowed 20 <= value <= 1000", 5.0),
    "asap_recorder": ("compression:=rar", "compression", "must be one of zstd, lz4, none", "rar"),
    "asap_mocap": ("mode:=optitrack", "mode", "must be one of vicon, topic", "optitrack"),
}


def node(name: str, *args: str, domain: int, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"asap_ros.ros.{MODULES[name]}", *args], capture_output=True,
                          text=True, timeout=timeout_s, env={**os.environ, "ROS_DOMAIN_ID": str(domain)})


def refusal(name: str, done: subprocess.CompletedProcess[str]) -> str:
    """The one ``refusing to start`` line of a node that exited 2 (rclpy may log more on stderr)."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    (line,) = [line for line in done.stderr.splitlines() if line.startswith(f"{name}: refusing to start: ")]
    return line


@pytest.mark.parametrize("name", MODULES)
def test_every_node_answers_help(name: str, dds_domain: int) -> None:
    done = node(name, "--help", domain=dds_domain)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {name} [--ros-args") and "parameters (defaults from " in done.stdout


@pytest.mark.parametrize("name", MODULES)
def test_every_node_refuses_a_bad_parameter_naming_node_parameter_and_value(name: str, dds_domain: int) -> None:
    override, parameter, problem, value = BAD_PARAMETERS[name]
    line = refusal(name, node(name, "--ros-args", "-p", override, domain=dds_domain))
    assert line == f"{name}: refusing to start: ROS parameters of /{name}: {parameter}: {problem} (got {value!r})"


@pytest.mark.parametrize("name", RUN_NODE)
def test_misspelt_parameters_stray_arguments_and_bad_ros_arguments_are_refused(name: str, dds_domain: int) -> None:
    line = refusal(name, node(name, "--ros-args", "-p", "rate_hz:=20.0", domain=dds_domain))
    assert re.fullmatch(rf"{name}: refusing to start: ROS parameters of /{name}: rate_hz: unknown parameter "
                        r"\(known: .+\) \(got 20\.0\)", line), line
    line = refusal(name, node(name, "--verbose", domain=dds_domain))
    assert line.startswith(f"{name}: refusing to start: unknown argument '--verbose' (--help lists")
    line = refusal(name, node(name, "--ros-args", "-p", "rate", domain=dds_domain))
    assert line.startswith(f"{name}: refusing to start: ROS arguments ") and "'-p', 'rate'" in line


def wait_for_line(process: subprocess.Popen[str], pattern: str, timeout_s: float) -> list[str]:
    """Lines of the process's output up to one matching ``pattern``."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if re.search(pattern, line):
            return lines
    process.kill()
    raise AssertionError(f"no line matching {pattern!r} within {timeout_s} s:\n" + "\n".join(lines[-40:]))


def started(name: str, domain: int, *params: str,
            env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], list[str]]:
    """The node as a process (``env``: its environment, default this one's), once it logs that it
    runs (naming the ROS 2 distribution)."""
    command = dying_with_this_process([sys.executable, "-m", f"asap_ros.ros.{MODULES[name]}", "--ros-args",
                                       *[a for p in params for a in ("-p", p)]])
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**(os.environ if env is None else env), "ROS_DOMAIN_ID": str(domain)})
    lines = wait_for_line(process, rf"\[{name}\]: running on ", timeout_s=60)
    assert f"running on ROS 2 {ros_distro()} (rclpy {rclpy_version()})" in lines[-1], lines[-1]
    return process, lines


def shared_memory_segments(pid: int) -> set[str]:
    """Fast DDS's shared-memory files mapped by process ``pid`` (``/dev/shm/fastrtps_*`` under
    Fast DDS 2, ``/dev/shm/fastdds_*`` under 3)."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return set(re.findall(r"/dev/shm/fast(?:rtps|dds)_\S+", maps))


def test_a_node_talks_ros_over_udp_only_unless_the_environment_chooses(dds_domain: int) -> None:
    """rclpy keeps the GIL through a DDS write, and a write through Fast DDS's shared memory was
    seen blocking ~300 ms (docs/operating.md, "Control timing", item 9): the nodes' own choice is
    UDPv4, which maps no shared-memory segment; Fast DDS's default, chosen in the environment,
    does (the check can fail)."""
    chosen_by = (TRANSPORTS_VARIABLE, *PROFILE_VARIABLES, "RMW_IMPLEMENTATION")  # what choose_transports reads
    clean = {k: v for k, v in os.environ.items() if k not in chosen_by}
    for env, says, segments in ((clean, "Fast DDS transports UDPv4 only", False),
                                ({**clean, TRANSPORTS_VARIABLE: "DEFAULT"},
                                 "Fast DDS transports DEFAULT (set in the environment)", True)):
        process, lines = started("asap_mocap", dds_domain, "mode:=topic", env=env)
        try:
            assert says in lines[-1], lines[-1]
            mapped = shared_memory_segments(process.pid)
            assert bool(mapped) == segments, (env.get(TRANSPORTS_VARIABLE), sorted(mapped))
        finally:
            process.send_signal(signal.SIGINT)
            output, _ = process.communicate(timeout=15)
        assert process.returncode == 0, output


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_mocap_node_cleanly(signum: int, dds_domain: int) -> None:
    process, _ = started("asap_mocap", dds_domain, "mode:=topic")
    process.send_signal(signum)
    output, _ = process.communicate(timeout=15)
    assert process.returncode == 0, output
    assert "Traceback" not in output, output


def test_sigterm_closes_the_recorders_bag(tmp_path: Path, dds_domain: int) -> None:
    process, _ = started("asap_recorder", dds_domain, f"dds_domain:={dds_domain}", f"output_dir:={tmp_path}",
                         "bag_name:=bag")
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert re.search(r"closed .*bag: \d+ messages in 1 file\(s\)", output), output
    assert (tmp_path / "bag" / "metadata.yaml").is_file()


def test_the_supervisor_refuses_readers_at_or_above_its_watchdog(dds_domain: int) -> None:
    line = refusal("asap_supervisor", node("asap_supervisor", "--ros-args", "-p", "realtime_priority:=85",
                                           "-p", "receive_priority:=85", domain=dds_domain))
    assert line == ("asap_supervisor: refusing to start: ROS parameters of /asap_supervisor: receive_priority: must "
                    "be below realtime_priority (85): the watchdog must run whatever its readers are doing (got 85)")


def test_the_supervisor_refuses_a_lease_as_long_as_its_takeover(dds_domain: int) -> None:
    """A hung deploy node's lease must have run out when the supervisor takes over."""
    line = refusal("asap_supervisor", node("asap_supervisor", "--ros-args", "-p", "lease_ms:=200.0",
                                           domain=dds_domain))
    assert line == ("asap_supervisor: refusing to start: ROS parameters of /asap_supervisor: lease_ms: must be "
                    "shorter than takeover_after_ms (200 ms): a hung deploy node's lease must have run out at the "
                    "takeover (got 200.0)")
