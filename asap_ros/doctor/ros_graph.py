"""ROS 2 side: the middleware and domain the docs require, the asap nodes on the graph, the supervisor."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from asap_ros.core.supervisor import ARMED, NOT_UNDER_GRANT
from asap_ros.doctor.report import Check, fail, ok, warn

DEPLOY_NODE = "asap_deploy"
SUPERVISOR_NODE = "asap_supervisor"
SUPERVISOR_STATE_TOPIC = f"/{SUPERVISOR_NODE}/state"
WATCHING = "WATCHING"
"""The supervisor's state while it watches a healthy (or absent) deploy node, ready to take over."""


def check_environment(expected_rmw: str) -> list[Check]:
    """``RMW_IMPLEMENTATION`` and ``ROS_DOMAIN_ID`` as docs/operating.md asks."""
    checks = []
    rmw = os.environ.get("RMW_IMPLEMENTATION", "")
    if rmw == expected_rmw:
        checks.append(ok("ros RMW_IMPLEMENTATION", rmw))
    else:
        now = f"is {rmw!r}" if rmw else "is not set (ROS uses its default RMW)"
        checks.append(warn("ros RMW_IMPLEMENTATION", f"{now}; the docs ask for {expected_rmw} in every shell "
                           "(deploy, supervisor, laptop)",
                           f"export RMW_IMPLEMENTATION={expected_rmw} (sudo apt install "
                           "ros-$ROS_DISTRO-rmw-cyclonedds-cpp)"))  # fmt: skip
    domain = os.environ.get("ROS_DOMAIN_ID", "")
    if not domain:
        checks.append(ok("ros ROS_DOMAIN_ID", "not set: 0 (a laptop running asap-ros ctl needs the same)"))
    elif not domain.isdigit() or int(domain) > 232:
        checks.append(fail("ros ROS_DOMAIN_ID", f"{domain!r} is not a domain id 0..232",
                           "export ROS_DOMAIN_ID=0 (or the id every shell of this robot uses)"))
    else:
        checks.append(ok("ros ROS_DOMAIN_ID", f"{domain} (a laptop running asap-ros ctl needs the same)"))
    return checks


@dataclass
class RosGraph:
    nodes: list[str]
    supervisor_state: str | None
    """The latched ``/asap_supervisor/state``; ``None`` when none arrived."""
    error: str = ""
    """Why the graph could not be read (rclpy missing, RMW not loadable)."""

    @property
    def deploy_running(self) -> bool:
        return f"/{DEPLOY_NODE}" in self.nodes


class RosGraphWatch:
    """A ROS node of its own (``asap_doctor_<pid>``) that watches the graph while the bus checks run."""

    def __init__(self) -> None:
        self._state: str | None = None
        self._error = ""
        self._done = threading.Event()
        self._ready = threading.Event()
        self._nodes: list[str] = []
        self._thread = threading.Thread(target=self._run, name="doctor ros", daemon=True)
        self._thread.start()
        self._ready.wait(30.0)

    def _run(self) -> None:
        try:
            import rclpy
            from rclpy.executors import SingleThreadedExecutor
            from rclpy.qos import DurabilityPolicy, QoSProfile
            from std_msgs.msg import String

            context = rclpy.Context()
            rclpy.init(args=[], context=context)
        except Exception as exc:  # rclpy missing, or the RMW does not load
            self._error = f"{type(exc).__name__}: {exc}"
            self._ready.set()
            return
        try:
            node = rclpy.create_node(f"asap_doctor_{os.getpid()}", context=context)
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            node.create_subscription(String, SUPERVISOR_STATE_TOPIC, self._on_state, latched)
            executor = SingleThreadedExecutor(context=context)
            executor.add_node(node)
            self._ready.set()
            while not self._done.is_set():
                executor.spin_once(timeout_sec=0.05)
            self._nodes = sorted(f"{ns.rstrip('/')}/{name}" for name, ns in node.get_node_names_and_namespaces())
            node.destroy_node()
        finally:
            rclpy.shutdown(context=context)

    def _on_state(self, msg) -> None:
        self._state = msg.data

    def stop(self) -> RosGraph:
        """The graph as discovered since the start."""
        self._done.set()
        self._thread.join(10.0)
        return RosGraph(self._nodes, self._state, self._error)


def check_graph(graph: RosGraph) -> list[Check]:
    """asap_deploy / asap_supervisor found or not, and the supervisor ready to take over."""
    if graph.error:
        return [fail("ros graph", f"cannot start a ROS node: {graph.error}",
                     "source the ROS 2 setup (/opt/ros/$ROS_DISTRO/setup.bash, install/setup.bash) and check "
                     "RMW_IMPLEMENTATION names an installed RMW")]  # fmt: skip
    supervisor = f"/{SUPERVISOR_NODE}" in graph.nodes
    deploy = graph.deploy_running
    checks = [ok("ros asap_deploy", "running" if deploy else "not running (start it with ros2 launch asap_ros "
                 "robot.launch.py)")]  # fmt: skip
    if not supervisor:
        if deploy:
            checks.append(fail("ros asap_supervisor", "not running while asap_deploy is: nobody takes over if "
                               "the deploy node dies", "ros2 run asap_ros asap_supervisor (robot.launch.py starts "
                               "both)"))  # fmt: skip
        else:
            checks.append(ok("ros asap_supervisor", "not running (robot.launch.py starts it)"))
        return checks
    state = graph.supervisor_state
    if state is None:
        checks.append(warn("ros asap_supervisor", f"running, but no {SUPERVISOR_STATE_TOPIC} arrived",
                           "check both sides use the same RMW_IMPLEMENTATION and ROS_DOMAIN_ID"))
    elif state.startswith(f"{WATCHING}: {ARMED}") and "held" not in state:
        checks.append(ok("ros asap_supervisor", f"{state} (takes over if asap_deploy dies or hangs)"))
    elif state.startswith(WATCHING) and "held" in state:
        checks.append(fail("ros asap_supervisor", f"{state}: the deploy node refuses Reset, Stand and Start",
                           "release the remote's combo, then asap-ros ctl reset"))
    elif state.startswith(f"{WATCHING}: {NOT_UNDER_GRANT}"):
        checks.append(fail("ros asap_supervisor", f"{state}: a takeover or e-stop it grants now would not be "
                           "obeyed", "wait one lease (a supervisor just started); if it stays, check that its "
                           "grants reach asap_deploy (same dds_domain and network_interface) and that only one "
                           "asap_supervisor runs"))  # fmt: skip
    elif state.startswith(WATCHING):
        checks.append(fail("ros asap_supervisor", f"{state}: it would not notice asap_deploy dying or hanging"
                           if deploy else f"{state} (start asap_deploy)",
                           "check that asap_deploy and asap_supervisor share the unitree DDS domain and network "
                           "interface (dds_domain, network_interface)") if deploy
                      else ok("ros asap_supervisor", f"{state} (start asap_deploy)"))
    elif state.startswith("SECONDARY"):
        checks.append(warn("ros asap_supervisor", f"{state}: this one only forwards e-stops",
                           "run one asap_supervisor per robot; a second one is for an ENTER e-stop terminal only"))
    else:
        checks.append(fail("ros asap_supervisor", f"{state} (it streams damping to the robot)",
                           "find the cause in the state above and asap-ros ctl status, then asap-ros ctl reset"))
    return checks
