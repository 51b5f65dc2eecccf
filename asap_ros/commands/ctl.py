"""``asap-ros ctl``: operate a running ``asap_deploy`` over ROS 2 (from the robot or a laptop).

``stand``, ``start NAME``, ``stop``, ``reset`` and ``estop`` call the deploy node's Trigger
services; ``estop`` also goes to ``asap_supervisor`` (which takes over if the deploy node
does not obey) and ``reset`` first releases a supervisor takeover. ``status`` prints mode,
fault, motion, timing and the supervisor's state from the latched topics.

Exit status: 0 done, 1 refused by the node (its reason is printed), 2 error (deploy node not
reachable, timeout, unknown motion).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from asap_ros.core.errors import AsapError

ACTIONS = ("stand", "start", "stop", "estop", "reset", "status")
SUPERVISOR_WAIT_S = 2.0
"""How long ``reset`` and ``estop`` look for the supervisor (it is optional)."""
HANDBACK_WAIT_S = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=ACTIONS, help="what to ask the deploy node")
    parser.add_argument("motion", nargs="?", help="motion to start (start only; default: its default_motion)")
    parser.add_argument("--node", default="asap_deploy", help="deploy node name (default asap_deploy)")
    parser.add_argument("--supervisor", default="asap_supervisor", help="supervisor node name")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for a node (default 5)")
    parser.add_argument("--domain", type=int, help="ROS domain id (default: $ROS_DOMAIN_ID)")


class OperatorClient:
    """Trigger-service calls and latched-topic reads against one deploy node."""

    def __init__(self, node: Any, deploy: str, supervisor: str, timeout_s: float):
        self.node = node
        self.deploy = deploy.strip("/")
        self.supervisor = supervisor.strip("/")
        self.timeout_s = timeout_s

    def find_client(self, service: str, wait_s: float) -> Any | None:
        """A Trigger client of ``service`` once it is available, or None after ``wait_s``."""
        from std_srvs.srv import Trigger

        client = self.node.create_client(Trigger, service)
        return client if client.wait_for_service(timeout_sec=wait_s) else None

    def require_deploy(self) -> None:
        """AsapError unless the deploy node's services are reachable."""
        if self.find_client(f"/{self.deploy}/stand", self.timeout_s) is None:
            raise AsapError(
                f"deploy node /{self.deploy} not reachable within {self.timeout_s:g} s: is asap_deploy "
                f"running, with the same ROS_DOMAIN_ID ({os.environ.get('ROS_DOMAIN_ID', '0')}) and RMW?"
            )

    def motions(self) -> list[str]:
        """Motions the deploy node offers (its ``~/start/<name>`` services)."""
        prefix = f"/{self.deploy}/start/"
        names = self.node.get_service_names_and_types()
        return sorted(name[len(prefix):] for name, _types in names if name.startswith(prefix))

    def call(self, service: str, wait_s: float | None = None) -> tuple[bool, str]:
        """``(success, message)`` of one Trigger call; AsapError if unreachable or no answer."""
        import rclpy
        from std_srvs.srv import Trigger

        client = self.find_client(service, self.timeout_s if wait_s is None else wait_s)
        if client is None:
            raise AsapError(f"service {service} not available within {self.timeout_s if wait_s is None else wait_s:g} s")
        future = client.call_async(Trigger.Request())
        rclpy.spin_until_future_complete(self.node, future, timeout_sec=self.timeout_s)
        if not future.done():
            raise AsapError(f"service {service} did not answer within {self.timeout_s:g} s")
        return future.result().success, future.result().message

    def start_service(self, motion: str | None) -> str:
        """The service starting ``motion``; an unknown motion is an AsapError listing the known ones."""
        if motion is None:
            return f"/{self.deploy}/start"
        deadline = time.monotonic() + 1.0  # service names can trail the node's first services
        while (known := self.motions()) and motion not in known and time.monotonic() < deadline:
            time.sleep(0.05)
        if motion not in known:
            raise AsapError(f"unknown motion {motion!r} (known: {', '.join(known) or 'none'})")
        return f"/{self.deploy}/start/{motion}"

    def latched(self, topics: dict[str, type], wait_s: float) -> dict[str, Any]:
        """The latched message of each topic that has one within ``wait_s``."""
        import rclpy
        from rclpy.qos import DurabilityPolicy, QoSProfile

        qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        received: dict[str, Any] = {}
        subs = [self.node.create_subscription(kind, topic, lambda m, t=topic: received.setdefault(t, m), qos)
                for topic, kind in topics.items()]
        deadline = time.monotonic() + wait_s
        while len(received) < len(topics) and time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.05)
        for sub in subs:
            self.node.destroy_subscription(sub)
        return received


def status_lines(client: OperatorClient) -> list[str]:
    """Mode, motion, fault, control timing and supervisor state as printable lines."""
    from diagnostic_msgs.msg import DiagnosticArray
    from std_msgs.msg import String, UInt64

    d, s = client.deploy, client.supervisor
    topics = {f"/{d}/mode": String, f"/{d}/fault": String, "/diagnostics": DiagnosticArray,
              f"/{s}/state": String, f"/{s}/lowcmd_writes": UInt64}
    got = client.latched(topics, client.timeout_s)
    if f"/{d}/mode" not in got:
        raise AsapError(f"no /{d}/mode within {client.timeout_s:g} s: is asap_deploy running?")
    lines = [f"mode: {got[f'/{d}/mode'].data}", f"fault: {getattr(got.get(f'/{d}/fault'), 'data', '') or '-'}"]
    diagnostics = getattr(got.get("/diagnostics"), "status", [])
    statuses = {st.name: {kv.key: kv.value for kv in st.values} for st in diagnostics}
    messages = {st.name: st.message for st in diagnostics}
    controller = statuses.get(f"{d}: controller", {})
    lines.append(f"motion: {controller.get('motion') or '-'}")
    if controller.get("motion_abort"):
        lines.append(f"last motion: {controller['motion_abort']}")
    loop = statuses.get(f"{d}: control loop")
    if loop and loop.get("control_error"):
        lines.append(f"control loop: FAILED: {loop['control_error']}")
    elif loop:
        lines.append(
            "control loop: {steps} steps, latency p50 {p50} / p99 {p99} / max {mx} us, deadline misses {miss}".format(
                steps=loop.get("steps", "?"), p50=loop.get("latency_p50_us", "?"), p99=loop.get("latency_p99_us", "?"),
                mx=loop.get("latency_max_us", "?"), miss=loop.get("deadline_misses", "?")))
    else:
        lines.append("control loop: no diagnostics yet")
    if f"{d}: motor temperatures" in messages:
        lines.append(f"motors: {messages[f'{d}: motor temperatures']}")
    if f"/{s}/state" in got:
        writes = getattr(got.get(f"/{s}/lowcmd_writes"), "data", 0)
        lines.append(f"supervisor: {got[f'/{s}/state'].data} (rt/lowcmd writes: {writes})")
    else:
        lines.append(f"supervisor: /{s} not running")
    return lines


def _report(what: str, result: tuple[bool, str]) -> int:
    success, message = result
    print(f"{what}: {'ok' if success else 'refused'}: {message}")
    return 0 if success else 1


def run(args: argparse.Namespace) -> int:
    import rclpy

    if args.action == "start" and args.motion is not None and not args.motion:
        raise AsapError("motion name is empty")
    if args.action != "start" and args.motion is not None:
        raise AsapError(f"'{args.action}' takes no motion name (got {args.motion!r})")
    rclpy.init(args=[], domain_id=args.domain) if args.domain is not None else rclpy.init(args=[])
    node = rclpy.create_node(f"asap_ctl_{os.getpid()}")
    client = OperatorClient(node, args.node, args.supervisor, args.timeout)
    try:
        if args.action == "status":
            print("\n".join(status_lines(client)))
            return 0
        if args.action == "estop":
            return _estop(client)
        client.require_deploy()
        if args.action == "reset":
            supervisor = f"/{client.supervisor}/reset"
            # as long as the command's timeout: a supervisor holding an e-stop, not yet discovered by this
            # fresh process, would leave the deploy node's reset refused
            if client.find_client(supervisor, max(SUPERVISOR_WAIT_S, client.timeout_s)) is not None:
                released = client.call(supervisor)
                if _report("supervisor reset", released) != 0:
                    return 1  # it still holds an e-stop or streams damping: the deploy node would refuse too
            else:
                supervision = deploy_supervision(client)
                if supervision != "unsupervised":  # the one expected is gone: one it held an e-stop for may
                    return _report("reset", (False, f"{supervisor} not found while asap_deploy is supervised "
                                             f"({supervision or 'its diagnostics not heard'}): the supervisor with "
                                             "authority may hold an e-stop; reset that one (--supervisor NAME)"))
            return _report("reset", _reset_deploy(client))
        if args.action == "start":
            return _report(f"start {args.motion or '(default motion)'}", client.call(client.start_service(args.motion)))
        return _report(args.action, client.call(f"/{client.deploy}/{args.action}"))
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def deploy_supervision(client: OperatorClient) -> str:
    """What the deploy node's diagnostics say of its supervisor (``obeys supervisor <id>``, ``no
    supervisor obeyed``, ``unsupervised``); "" when none were heard within the timeout."""
    from diagnostic_msgs.msg import DiagnosticArray

    got = client.latched({"/diagnostics": DiagnosticArray}, client.timeout_s)
    for status in getattr(got.get("/diagnostics"), "status", []):
        if status.name == f"{client.deploy}: controller":
            return next((kv.value for kv in status.values if kv.key == "supervisor"), "")
    return ""


def _reset_deploy(client: OperatorClient) -> tuple[bool, str]:
    """The deploy node's Reset; while it has not yet heard that the supervisor handed rt/lowcmd
    back (a control period or two after the supervisor's reset), asked again for up to 1 s."""
    deadline = time.monotonic() + HANDBACK_WAIT_S
    while True:
        result = client.call(f"/{client.deploy}/reset")
        if result[0] or "reset the supervisor first" not in result[1] or time.monotonic() > deadline:
            return result
        time.sleep(0.02)


def _estop(client: OperatorClient) -> int:
    """E-stop through the supervisor and the deploy node at once: each call goes out as soon as
    its service is found, neither waits for the other; error if neither answered."""
    import rclpy
    from std_srvs.srv import Trigger

    names = (f"/{client.supervisor}/estop", f"/{client.deploy}/estop")
    clients = {name: client.node.create_client(Trigger, name) for name in names}
    futures: dict[str, Any] = {}
    find_until = time.monotonic() + client.timeout_s
    deadline = find_until + client.timeout_s
    while time.monotonic() < deadline:
        for name, trigger in clients.items():
            if name not in futures and trigger.service_is_ready() and time.monotonic() < find_until:
                futures[name] = trigger.call_async(Trigger.Request())
        searching = time.monotonic() < find_until and len(futures) < len(clients)
        if not searching and all(future.done() for future in futures.values()):
            break
        rclpy.spin_once(client.node, timeout_sec=0.01)
    answered = 0
    for name in names:
        future = futures.get(name)
        if future is None:
            print(f"estop via {name}: service not available")
        elif not future.done():
            print(f"estop via {name}: no answer within {client.timeout_s:g} s")
        else:
            answered += 1
            _report(f"estop via {name}", (future.result().success, future.result().message))
    if not answered:
        raise AsapError("e-stop reached neither the deploy node nor the supervisor: use the remote or power off")
    return 0
