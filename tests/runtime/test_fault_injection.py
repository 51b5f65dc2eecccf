"""The fault-injection hook (test support): syntax, refusals, and what each fault does to a step."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from asap_ros.config.controller import load_controller_config
from asap_ros.config.paths import policies_dir
from asap_ros.config.robot import load_robot_model
from asap_ros.core.controller import Controller
from asap_ros.core.errors import ConfigError
from asap_ros.core.state import NUM_MOTORS, RobotState
from asap_ros.runtime.fault_injection import ENV_VAR, Fault, FaultInjection, InjectedFault, parse_faults
from asap_ros.runtime.policies import build_controller, load_policy_runner


def test_absent_means_nothing_is_installed() -> None:
    assert FaultInjection.from_env({}) is None
    injection = FaultInjection.from_env({ENV_VAR: "raise@tick=120"})
    assert injection.describe() == "ASAP_ROS_FAULT_INJECTION=raise@tick=120"


def test_every_form_parses() -> None:
    faults = parse_faults("raise@tick=120; slow=0.3@motion_tick=25+ ;inf@motion_tick=4;nan=3@tick=7;exit@tick=9")
    assert faults == (
        Fault("raise", 0.0, "tick", 120, False, "raise@tick=120"),
        Fault("slow", 0.3, "motion_tick", 25, True, "slow=0.3@motion_tick=25+"),
        Fault("inf", 0.0, "motion_tick", 4, False, "inf@motion_tick=4"),
        Fault("nan", 3.0, "tick", 7, False, "nan=3@tick=7"),
        Fault("exit", 0.0, "tick", 9, False, "exit@tick=9"),
    )
    once, repeated = faults[0], faults[1]
    assert [once.fires(t, None) for t in (119, 120, 121)] == [False, True, False]
    assert [repeated.fires(1000, t) for t in (24, 25, 26)] == [False, True, True]
    assert not repeated.fires(1000, None)  # no motion step in this control step
    (every_eighth,) = parse_faults("slow=0.025@tick=50+%8")
    assert every_eighth == Fault("slow", 0.025, "tick", 50, True, "slow=0.025@tick=50+%8", 8)
    assert [t for t in range(40, 80) if every_eighth.fires(t, None)] == [50, 58, 66, 74]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("raise=1@tick=3", "raise takes no value"),
        ("slow@tick=3", "slow needs =SECONDS > 0"),
        ("slow=-1@tick=3", "slow needs =SECONDS > 0"),
        ("slow=0@tick=3", "slow needs =SECONDS > 0"),
        ("inf=x@tick=3", "inf= takes an output index >= 0"),
        ("explode@tick=1", "unknown fault (known: raise, slow, exit, clock, inf, nan)"),
        ("clock@tick=3", "clock needs =SECONDS, non-zero (negative: backward)"),
        ("clock=0@tick=3", "clock needs =SECONDS, non-zero (negative: backward)"),
        ("clock=-1@tick=3+", "clock steps once: no trailing +"),
        ("raise@tock=1", "expected FAULT@tick=N or FAULT@motion_tick=N"),
        ("raise", "expected FAULT@tick=N"),
        ("slow=0.1@tick=3%8", "%K needs a trailing + before it"),
        ("slow=0.1@tick=3+%0", "%K needs a trailing + before it"),
        (" ; ", "set but empty"),
    ],
)
def test_a_bad_value_names_the_variable_and_the_part(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=rf"^\$ASAP_ROS_FAULT_INJECTION: {re.escape(problem)}") as error:
        parse_faults(text)
    assert error.value.file == "$ASAP_ROS_FAULT_INJECTION"


@pytest.fixture
def controller() -> Controller:
    robot = load_robot_model()
    runner = load_policy_runner(policies_dir() / "CR7_level1.yaml", robot)
    return build_controller(robot, {"CR7_level1": runner}, load_controller_config())


def test_inf_replaces_the_motion_actors_raw_output_at_its_step(controller: Controller) -> None:
    FaultInjection(parse_faults("inf=3@motion_tick=2")).install(controller)
    runner = controller.policies["CR7_level1"]
    state = RobotState(q=controller.robot.default_q.copy(), temperature=np.full(NUM_MOTORS, 40.0))
    outputs = [runner.step(state) for _ in range(4)]
    assert [bool(np.isinf(o.actor_output).any()) for o in outputs] == [False, False, True, False]
    assert outputs[2].actor_output[3] == np.inf and outputs[2].raw_action[3] == 100.0  # clipped: the controller's check sees it


def test_an_index_beyond_the_actor_is_refused_at_install(controller: Controller) -> None:
    with pytest.raises(ConfigError, match=r"output index beyond motion CR7_level1's 23 outputs \(got 'nan=23@tick=1'\)"):
        FaultInjection(parse_faults("nan=23@tick=1")).install(controller)


def _output(motion_tick: int | None) -> SimpleNamespace:
    """The one field of a StepOutput the step faults read: its motion actor step, if any."""
    return SimpleNamespace(policy=None if motion_tick is None else SimpleNamespace(tick=motion_tick))


def test_step_faults_fire_after_the_step_they_name() -> None:
    injection = FaultInjection(parse_faults("raise@motion_tick=5;exit@tick=9"))
    injection.before_step(8)
    injection.after_step(_output(4))
    with pytest.raises(InjectedFault, match=r"injected by ASAP_ROS_FAULT_INJECTION \(raise@motion_tick=5\)"):
        injection.after_step(_output(5))
    injection.before_step(9)
    with pytest.raises(SystemExit):
        injection.after_step(_output(None))


def test_a_clock_step_moves_the_loops_system_time_once_and_never_its_monotonic_clock() -> None:
    from asap_ros.runtime.clock import Clock

    injection = FaultInjection(parse_faults("clock=-10.5@motion_tick=3"))
    clock = injection.clock(Clock(monotonic_ns=lambda: 7, time_ns=lambda: 100_000_000_000))
    for motion_tick, expected in ((2, 100_000_000_000), (3, 89_500_000_000), (4, 89_500_000_000)):
        injection.after_step(_output(motion_tick))
        assert (clock.time_ns(), clock.monotonic_ns()) == (expected, 7)
    base = Clock()
    assert FaultInjection(parse_faults("raise@tick=1")).clock(base) is base
