"""One way to start an asap_ros node: ``--help``, its parameters, the refusal, signals, the exit code.

Every node's ``main`` is ``run_node(SCHEMA, summary, NodeClass, argv)``:

1. ``-h``/``--help`` before any ``--ros-args`` prints the node's parameters with the defaults of
   its file and returns 0 (no rclpy, no DDS); any other argument there is refused (exit 2).
2. rclpy starts without its own signal handlers, its Fast DDS on UDPv4 only unless the environment
   chooses (:func:`asap_ros.ros.fastdds.choose_transports`); one rclpy node named as the schema is
   created.
3. The parameters are declared from the schema, with the defaults of its file in ``config/``,
   and checked (:meth:`asap_ros.ros.parameters.NodeParams.for_schema`); then
   ``NodeClass(node, params)`` builds the node and :meth:`NodeBehaviour.start` starts it. An
   ``AsapError`` from any of these (or rclpy refusing the ROS arguments) prints one line,
   ``<node>: refusing to start: <file or parameters>: <key>: <problem> (got <value>)``, and
   returns 2.
4. The executor spins until SIGINT or SIGTERM (or ``NodeBehaviour.finished``); then
   :meth:`NodeBehaviour.shutdown` stops the node and gives the exit code (0 clean, 1 failed).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from asap_ros.config.node_params import NodeSchema, help_requested
from asap_ros.core.errors import AsapError
from asap_ros.ros.fastdds import choose_transports

__all__ = [
    "EXIT_FAILED", "EXIT_OK", "EXIT_REFUSED", "SPIN_TIMEOUT_S", "STOP_SIGNALS", "NodeBehaviour", "run_node",
    "unknown_arguments",
]

EXIT_OK = 0
EXIT_FAILED = 1
"""The node ran, then failed (the recorder's bag faulted, the Vicon stream broke, ...)."""
EXIT_REFUSED = 2
"""The node refused to start: a bad argument, parameter or file; one line on stderr says which."""
SPIN_TIMEOUT_S = 0.1
"""Longest executor wait: a signal (handled between waits) or the node's own end is seen this soon."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Either one shuts the node down cleanly; more of them during the shutdown are ignored (SIGKILL
ends a node whose shutdown hangs, as ``ros2 launch`` escalates)."""


class NodeBehaviour:
    """What a node class gives :func:`run_node`, which builds it as ``NodeClass(rclpy_node, params)``
    (publishers, services, DDS set-up; every check that can refuse the start) and then calls
    :meth:`start` for the work itself (threads, loops, files). Defaults: nothing to start, never
    ends by itself, exit 0."""

    def start(self) -> None:
        """Begin the node's work (threads, DDS, files); an ``AsapError`` here refuses the start too."""

    def finished(self) -> bool:
        """True once the node has ended by itself (checked between executor turns)."""
        return False

    def shutdown(self) -> int:
        """Stop and release everything, also after a refused or failed :meth:`start`; the exit code."""
        return EXIT_OK


def unknown_arguments(argv: Sequence[str] | None) -> list[str]:
    """The node's own arguments (those before ``--ros-args``) other than ``-h``/``--help``."""
    args = list(sys.argv[1:] if argv is None else argv)
    own = args[: args.index("--ros-args")] if "--ros-args" in args else args
    return [arg for arg in own if arg not in ("-h", "--help")]


def run_node(schema: NodeSchema, summary: str, build: Callable[[Any, Any], NodeBehaviour],
             argv: Sequence[str] | None = None, *, executor: str = "single", threads: int | None = None) -> int:
    """Run one node as a process's ``main`` (see the module) and return its exit code.

    ``argv``: the arguments after the program name (default ``sys.argv[1:]``); ``executor``:
    ``single``, ``multi`` (``threads`` threads, for callback groups that run in parallel) or
    ``events`` (:func:`asap_ros.ros.compat.make_executor`). rclpy's default context is used: one
    node per process.
    """
    try:
        if help_requested(argv, schema.name, summary, schema.params, schema.defaults_path()):
            return EXIT_OK
    except AsapError as exc:  # the defaults file itself is bad
        return _refuse(schema, exc)
    if unknown := unknown_arguments(argv):
        return _refuse(schema, f"unknown argument {unknown[0]!r} (--help lists the parameters; "
                               "ROS arguments follow --ros-args)")
    stop = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in STOP_SIGNALS}
    try:
        return _run(schema, build, list(sys.argv[1:] if argv is None else argv), stop, executor, threads)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _refuse(schema: NodeSchema, reason: object) -> int:
    print(f"{schema.name}: refusing to start: {reason}", file=sys.stderr, flush=True)
    return EXIT_REFUSED


def _run(schema: NodeSchema, build: Callable[[Any, Any], NodeBehaviour], args: list[str], stop: threading.Event,
         executor_kind: str, threads: int | None) -> int:
    """rclpy up, the node built, started, spun until ``stop`` and shut down; rclpy down."""
    transports = choose_transports(os.environ)  # before rclpy creates its DDS participant
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from rclpy.signals import SignalHandlerOptions

    from asap_ros.ros.compat import describe, make_executor
    from asap_ros.ros.parameters import NodeParams

    try:
        rclpy.init(args=[sys.argv[0], *args], signal_handler_options=SignalHandlerOptions.NO)
    except RuntimeError as exc:  # rclpy's RCLError / UnknownROSArgsError: bad --ros-args
        return _refuse(schema, f"ROS arguments {args}: {exc}")
    node = rclpy.create_node(schema.name)
    executor = make_executor(executor_kind, node.context, threads)
    behaviour: NodeBehaviour | None = None
    try:
        try:
            behaviour = build(node, NodeParams.for_schema(node, schema))
            behaviour.start()
        except AsapError as exc:
            if behaviour is not None:
                behaviour.shutdown()
            return _refuse(schema, exc)
        except BaseException:
            if behaviour is not None:
                behaviour.shutdown()
            raise
        node.get_logger().info(f"running on {describe()}; {transports}")
        executor.add_node(node)
        try:
            while not stop.is_set() and not behaviour.finished():
                executor.spin_once(timeout_sec=SPIN_TIMEOUT_S)
        except ExternalShutdownException:  # the context was shut down elsewhere: as on a signal
            pass
        except BaseException:  # a callback raised: still shut down (the deploy node damps), then fail
            behaviour.shutdown()
            raise
        return behaviour.shutdown()
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
