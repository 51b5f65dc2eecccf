"""``asap_deploy``: the control loop on the G1 (or the simulated G1), behind ROS 2.

The control loop runs in a process of its own that imports no rclpy
(:mod:`asap_ros.runtime.control_process`, started and spoken to by
:class:`~asap_ros.runtime.loop_process.LoopProcess`): its control thread reads ``rt/lowstate`` and
writes ``rt/lowcmd`` over unitree DDS (:class:`~asap_ros.runtime.wiring.DdsControl`, the wiring
``asap-ros sim`` uses too), and no rclpy call of this node (a publish, a service reply, a log
line to ``/rosout``) can hold the GIL its control thread needs. This process ending ends that
one (it damps first); that one ending latches DAMPING here (``control process ended``) and the
supervisor's lease watch takes over.
From the step records that process sends (and rclpy timers) the node publishes
``joint_states``, ``imu``, ``~/mode`` and ``~/fault`` (latched), ``diagnostics`` (latched),
``~/policy_step`` (compact) and every step in full on DDS (:mod:`asap_ros.runtime.step_topics`).
With ``supervised`` (the default)
the control thread writes ``rt/lowcmd`` only under the supervisor's lease
(:mod:`asap_ros.core.lease`): one beat per step out, grants in, both on unitree DDS; Stand
and Start are refused while the supervisor objects, Reset while it holds an e-stop or streams
damping, and its takeover latches DAMPING with its reason. The stamp of the newest
``mocap/pose`` (its resolved name, on DDS) goes into each step record: the control thread reads
it after each write, no rclpy callback per pose.
Operator services (``std_srvs/Trigger``):
``~/stand``, ``~/stop``, ``~/estop``, ``~/reset``, ``~/start`` (the ``default_motion``
parameter) and one ``~/start/<motion>`` per loaded policy. ``~/estop`` is served by a node of its
own (``<name>_estop``) on an executor thread of its own: it never waits behind another request.
Both executors are single-threaded. Every request,
accepted or refused, is logged with its reason, kept in ``diagnostics`` (the newest few) and
published on ``~/operator`` (std_msgs/String, one JSON object each; recorded by asap_recorder).
Nothing authenticates a caller on the domain (see docs/operating.md).
"""

from __future__ import annotations

import collections
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from asap_ros.config.node_params import DEPLOY
from asap_ros.core.errors import ConfigError, RejectedRequest
from asap_ros.ros.node_main import EXIT_OK, NodeBehaviour, run_node
from asap_ros.ros.parameters import NodeParams
from asap_ros.runtime.scheduling import below, run_realtime

NODE_NAME = "asap_deploy"
MODE_CHECK_S = 0.1
"""How often the latched ``~/mode`` is checked against the control loop's mode."""
MOCAP_TOPIC = "mocap/pose"
OPERATOR_TOPIC = "~/operator"
OPERATOR_RECORDS_KEPT = 10
"""Operator requests shown in diagnostics (the newest)."""


def operator_line(request: str, source: str, accepted: bool, reason: str) -> str:
    """The log line of one operator request (the e2e harness reads it back as the call's record)."""
    return f"operator {request} via {source}: {'accepted' if accepted else 'REFUSED'}: {reason}"


class DeployNode(NodeBehaviour):
    """Wires the control loop to unitree DDS and to the ROS interface of one rclpy node."""

    def __init__(self, node: Any, params: NodeParams):
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from std_msgs.msg import Float32MultiArray, String

        from asap_ros.runtime.control_process import build_controller_from_values
        from asap_ros.runtime.loop_process import LoopProcess
        from asap_ros.runtime.mocap import dds_topic

        self.node = node
        self.params = params
        p, source = self.params, self.params.source
        sys.setswitchinterval(p["switch_interval_ms"] / 1e3)

        # every file and value checked here, before the control process loads the same ones
        self.robot, config, self.controller = build_controller_from_values(p.values, source)
        self.params.set_validator(self._check_params)

        # started at normal priority: it loads the actors and joins DDS before it schedules its threads
        self.loop = LoopProcess({"values": dict(p.values), "source": str(source),
                                 "cpus": sorted(self._control_cpus(p["control_cpu"])),
                                 "mocap_topic": dds_topic(node.resolve_topic_name(MOCAP_TOPIC))})
        # the node's threads one below the control thread (scheduling.below), inherited by every
        # thread started from here on (executors, the link's receiver and sinks)
        others = below(p["realtime_priority"])
        self.scheduling_note = run_realtime(others) if others else None
        policies = self.controller.policies

        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._mode_pub = node.create_publisher(String, "~/mode", latched)
        self._fault_pub = node.create_publisher(String, "~/fault", latched)
        self._policy_pub = node.create_publisher(Float32MultiArray, "~/policy_step", 10)
        self._operator_pub = node.create_publisher(String, OPERATOR_TOPIC, QoSProfile(depth=100))
        self.operator_records: collections.deque[dict[str, Any]] = collections.deque(maxlen=OPERATOR_RECORDS_KEPT)
        self._mode_lock = threading.Lock()
        self._shown: tuple[str, str] | None = None
        self._mode_differed = False
        self._show_mode(self.controller.mode.name, "", f"starting in {self.controller.mode.name}")
        self._state_publisher = StatePublisher(node, self.loop, self.robot.joint_names, p["state_publish_rate_hz"])
        self._diagnostics = DiagnosticsPublisher(node, self.loop, self.robot.joint_names, config.safety,
                                                 self.operator_records)
        self._create_services(policies)
        self.loop.add_sink(self._on_step)
        self.loop.add_sink(self._state_publisher.on_step)  # right after each step, not beside the next one
        self._timers = {"diagnostics_rate_hz": node.create_timer(1.0 / p["diagnostics_rate_hz"], self._diagnostics.publish)}
        node.create_timer(MODE_CHECK_S, self._show_loop_mode)
        self.params.on_change(self._apply_rates)

    # --- set-up helpers ------------------------------------------------------------------
    def _create_services(self, policies: Mapping[str, Any]) -> None:
        """The operator services on the node; ``~/estop`` on a node of its own (:attr:`estop_node`,
        spun by its own executor thread, see :func:`main`), so it never waits behind another
        request waiting for the control step's lock."""
        import rclpy
        from std_srvs.srv import Trigger

        from asap_ros.core.state_machine import EStop, Reset, Stand, Start, Stop

        node = self.node
        handlers: dict[str, Callable[[], Any]] = {
            "~/stand": Stand,
            "~/stop": Stop,
            "~/reset": Reset,
            "~/start": lambda: Start(self.params["default_motion"]),
            **{f"~/start/{name}": (lambda n=name: Start(n)) for name in policies},
        }
        self._services = [node.create_service(Trigger, name, self._trigger(name, make)) for name, make in handlers.items()]
        self.estop_node = rclpy.create_node(f"{node.get_name()}_estop", namespace=node.get_namespace(),
                                            context=node.context)
        estop_service = f"{node.get_fully_qualified_name()}/estop"
        self._services.append(self.estop_node.create_service(
            Trigger, estop_service, self._trigger("~/estop", lambda: EStop("operator e-stop (~/estop service)"))))

    def _trigger(self, service: str, make_request: Callable[[], Any]) -> Callable[[Any, Any], Any]:
        """A Trigger callback applying one request; a refusal is success=False with the reason."""
        from asap_ros.core.state_machine import describe

        def callback(_request: Any, response: Any) -> Any:
            request = make_request()
            try:
                response.success, response.message = True, self.loop.request(request)
            except RejectedRequest as exc:
                response.success, response.message = False, str(exc)
            self._record_operator(service, describe(request), response.success, response.message)
            return response

        return callback

    def _record_operator(self, source: str, request: str, accepted: bool, reason: str) -> None:
        """One operator request in the log, diagnostics and on ``~/operator`` (recorded). A
        std_srvs/Trigger call carries no caller identity: the source is the service called."""
        from std_msgs.msg import String

        record = {"stamp_ns": time.time_ns(), "source": source, "request": request, "accepted": accepted,
                  "reason": reason}
        self.operator_records.append(record)
        try:
            self._operator_pub.publish(String(data=json.dumps(record)))
        except Exception as exc:  # rclpy's context is gone on Ctrl-C: the log line below stays
            record["unpublished"] = repr(exc)
        text = operator_line(request, source, accepted, reason)
        if accepted:
            self.node.get_logger().info(text)
        else:
            self.node.get_logger().warning(text)

    def _control_cpus(self, cpu: int) -> frozenset[int]:
        from asap_ros.runtime.control_loop import existing_cpu

        try:
            return frozenset({existing_cpu(cpu)}) if cpu >= 0 else frozenset()
        except ValueError as exc:
            raise ConfigError(self.params.source, "control_cpu", str(exc), cpu) from exc

    def _check_params(self, values: dict[str, Any]) -> None:
        """Cross-parameter rule, at start-up and on every runtime change: a loaded default motion."""
        motions = sorted(self.controller.policies)
        if values["default_motion"] not in motions:
            raise ConfigError(self.params.source, "default_motion",
                              f"not a loaded motion (known: {', '.join(motions)})", values["default_motion"])

    def _apply_rates(self, changed: dict[str, Any]) -> None:
        if "state_publish_rate_hz" in changed:
            self._state_publisher.period_ns = int(1e9 / changed["state_publish_rate_hz"])
        for name, timer in self._timers.items():
            if name in changed:
                timer.timer_period_ns = int(1e9 / changed[name])

    # --- sink thread -------------------------------------------------------------------------
    def _on_step(self, record: Any) -> None:
        from asap_ros.ros.messages import policy_step_msg

        out, policy = record.output, record.output.policy
        if out.transition is not None:
            t = out.transition
            fault = t.reason if t.to_mode.name == "DAMPING" else ""
            self._show_mode(t.to_mode.name, fault, f"{t.from_mode.name} -> {t.to_mode.name}: {t.reason}")
            if "late control steps" in fault:
                self.node.get_logger().warning(f"the newest steps, ms: {self.loop.recent_steps()}")
        if policy is not None:
            self._policy_pub.publish(policy_step_msg(policy))

    def _show_loop_mode(self) -> None:
        """Timer: the control loop's mode and fault, when ``~/mode`` has said otherwise for two
        checks in a row, i.e. the step record of a transition never reached the sink (the queues
        drop records when the sink falls behind; a sink error loses one; the control process
        ended)."""
        status = self.loop.status()
        mode = status.mode
        now = (mode, (status.fault or "") if mode == "DAMPING" else "")
        differs = self._shown != now
        if differs and self._mode_differed:
            self._show_mode(*now, f"-> {mode}: {now[1] or 'read from the control loop'} (transition record lost)")
        self._mode_differed = differs

    def _show_mode(self, mode: str, fault: str, why: str) -> None:
        """Publish ``~/mode`` and ``~/fault`` and log ``why``, unless they already say this (the
        sink thread and the mode timer both call it)."""
        from std_msgs.msg import String

        with self._mode_lock:
            if self._shown == (mode, fault):
                return
            self._shown = (mode, fault)
            self._mode_pub.publish(String(data=mode))
            self._fault_pub.publish(String(data=fault))
        if mode == "DAMPING":  # two call sites: rclpy refuses a call site whose severity changes
            self.node.get_logger().warning(why)
        else:
            self.node.get_logger().info(why)

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Start the control loop (in its process) and the e-stop node's executor."""
        from rclpy.executors import SingleThreadedExecutor

        self.loop.start()
        self.node.get_logger().info(f"control process pid {self.loop.pid}")
        for note in (self.scheduling_note, self.loop.scheduling_note):
            if note:
                self.node.get_logger().warning(note)
        if self.loop.fault_injection is not None:
            self.node.get_logger().warning(f"FAULT INJECTION ACTIVE (test support): {self.loop.fault_injection}")
        self._estop_executor = SingleThreadedExecutor(context=self.node.context)
        self._estop_executor.add_node(self.estop_node)
        threading.Thread(target=_spin_quietly, args=(self._estop_executor,), name="asap-estop", daemon=True).start()
        self.node.get_logger().info(f"control loop running; motions: {', '.join(sorted(self.controller.policies))}")

    def shutdown(self) -> int:
        """Damp the robot (a clean exit never leaves it holding a pose unattended: the control
        process e-stops and writes damping before it ends), and log how many samples were written
        per DDS topic (``published {json}``, for benchmarks) and the control loop's statistics."""
        reason = f"{NODE_NAME} shutting down"
        if self.loop.alive:
            self._record_operator("shutdown", f"EStop({reason})", True, "clean shutdown")
        summary = self.loop.stop(reason)
        if summary is not None:
            self.node.get_logger().info(f"published {json.dumps(summary['written'])}")
            self.node.get_logger().info(f"control loop {json.dumps(summary['stats'])}")
        else:
            self.node.get_logger().warning(f"no statistics from the control loop: {self.loop.ended or 'it did not answer'}")
        executor = getattr(self, "_estop_executor", None)
        if executor is not None:
            executor.shutdown()
        self.estop_node.destroy_node()
        return EXIT_OK


class StatePublisher:
    """``joint_states`` and ``imu`` from the control loop's newest state, on the loop's sink thread
    right after a step (at most ``rate_hz``): Python work that never runs beside the next step
    (a timer of its own woke at the control rate too, and held the GIL the step needed)."""

    def __init__(self, node: Any, loop: Any, joint_names: tuple[str, ...], rate_hz: float):
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import Imu, JointState

        self._loop = loop
        self._joint_names = joint_names
        self._joints = node.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
        self._imu = node.create_publisher(Imu, "imu", qos_profile_sensor_data)
        self._published_stamp_ns = 0
        self.period_ns = int(1e9 / rate_hz)
        self._next_ns = 0

    def on_step(self, _record: Any) -> None:
        """Sink: publish when a period has passed since the last one."""
        now = time.monotonic_ns()
        if now >= self._next_ns:
            self._next_ns = now + self.period_ns - self.period_ns // 10  # a tenth early: the step grid jitters
            self.publish()

    def publish(self) -> None:
        """The control loop's newest decoded state, unless already published."""
        from asap_ros.ros.messages import imu_msg, joint_state_msg

        state = self._loop.last_state
        if state is None or state.stamp_ns == self._published_stamp_ns:
            return
        self._published_stamp_ns = state.stamp_ns
        self._joints.publish(joint_state_msg(state, self._joint_names))
        self._imu.publish(imu_msg(state))


class DiagnosticsPublisher:
    """``diagnostics`` (latched, so ``asap-ros ctl status`` gets the last one at once)."""

    def __init__(self, node: Any, loop: Any, joint_names: tuple[str, ...], safety: Any,
                 operator_records: Any = ()):
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import DurabilityPolicy, QoSProfile

        self._operator_records = operator_records
        self._node_name = node.get_name()
        self._loop = loop
        self._joint_names = joint_names
        self._safety = safety
        self._pub = node.create_publisher(
            DiagnosticArray, "diagnostics", QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self._misses_reported = 0

    def publish(self) -> None:
        from asap_ros.ros.messages import DiagnosticsInput, diagnostics_msg

        loop = self._loop
        status, stats = loop.status(), loop.stats()
        timing = stats.as_dict() if stats is not None else {}
        misses = stats.late_steps if stats is not None else self._misses_reported
        data = DiagnosticsInput(
            stamp_ns=time.time_ns(),
            timing=timing,
            # lost on their way to the sinks: in the control loop's queue, on the link, in the node's queue
            dropped_records=(stats.dropped_records if stats is not None else 0) + status.unsent_steps + loop.dropped_steps,
            mode=status.mode,
            motion=status.motion,
            fault=status.fault,
            state=loop.last_state,
            joint_names=self._joint_names,
            max_state_age_ms=self._safety.max_state_age_ms,
            max_start_temperature_c=self._safety.max_start_temperature_c,
            motion_abort_temperature_c=self._safety.motion_abort_temperature_c,
            max_temperature_c=self._safety.max_temperature_c,
            new_deadline_misses=misses - self._misses_reported,
            sink_errors=[*status.sink_errors, *loop.sink_errors],
            control_error=status.fatal_error,
            motion_abort=status.motion_abort,
            monotonic_ns=time.monotonic_ns(),
            operator=[f"{r['request']} via {r['source']}: {'accepted' if r['accepted'] else 'refused'}: {r['reason']}"
                      for r in list(self._operator_records)],
            supervisor=status.supervisor,
        )
        self._misses_reported = misses
        self._pub.publish(diagnostics_msg(data, self._node_name))


def _spin_quietly(executor: Any) -> None:
    from rclpy.executors import ExternalShutdownException

    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``asap_deploy``: exit 2 with one line naming the problem on bad parameters."""
    return run_node(DEPLOY, __doc__.splitlines()[0], DeployNode, argv, executor="single")


if __name__ == "__main__":
    sys.exit(main())
