"""One validation system: a node parameter and the config-file key it overrides are held to the
same bounds and refused with the same words."""

from __future__ import annotations

import dataclasses

import pytest

from asap_ros.config.controller import SAFETY_BOUNDS, STAND_UP_DURATION_S, load_controller_config
from asap_ros.config.node_params import DEPLOY_PARAMS, SUPERVISOR_PARAMS, check_value
from asap_ros.config.reader import ConfigReader
from asap_ros.core.errors import ConfigError
from asap_ros.core.safety import SafetyConfig

DEPLOY = {spec.name: spec for spec in DEPLOY_PARAMS}


def test_every_safety_threshold_has_its_bounds() -> None:
    assert list(SAFETY_BOUNDS) == [f.name for f in dataclasses.fields(SafetyConfig)]


@pytest.mark.parametrize("name", ["max_state_age_ms", "max_tilt_deg", "max_temperature_c", "max_start_temperature_c"])
def test_deploy_overrides_use_the_controller_config_bounds(name: str) -> None:
    spec = DEPLOY[name]
    assert (spec.low, spec.high) == SAFETY_BOUNDS[name] and spec.zero_keeps
    assert (DEPLOY["stand_up_duration_s"].low, DEPLOY["stand_up_duration_s"].high) == STAND_UP_DURATION_S


@pytest.mark.parametrize("value", [1001.0, 0.5, "fast", float("nan"), True, 50.0, 1000.0, 1.0])
def test_a_parameter_and_a_config_key_get_the_same_verdict(value) -> None:
    """``max_state_age_ms`` (the disagreement the two systems had: no upper bound in the file)."""
    low, high = SAFETY_BOUNDS["max_state_age_ms"]
    reader = ConfigReader({"max_state_age_ms": value}, "controller.yaml")
    outcomes = []
    for check in (lambda: reader.float("max_state_age_ms", low=low, high=high),
                  lambda: check_value(DEPLOY["max_state_age_ms"], value, "params")):
        try:
            outcomes.append(("ok", check()))
        except ConfigError as exc:
            outcomes.append(("refused", exc.problem.split(":")[0]))
    assert outcomes[0] == outcomes[1], outcomes


def test_the_shipped_controller_config_is_within_the_bounds() -> None:
    safety = load_controller_config().safety
    for name, (low, high) in SAFETY_BOUNDS.items():
        value = getattr(safety, name)
        assert (low is None or value >= low) and (high is None or value <= high), (name, value)


def test_the_four_nodes_are_schemas_whose_package_files_are_complete_and_valid() -> None:
    from asap_ros.config.node_params import NODES

    assert list(NODES) == ["asap_deploy", "asap_supervisor", "asap_recorder", "asap_mocap"]
    for name, schema in NODES.items():
        assert schema.defaults_path().name == f"{name.removeprefix('asap_')}.yaml"
        assert set(schema.defaults()) == {spec.name for spec in schema.params}, name
        assert len({spec.name for spec in schema.params}) == len(schema.params), f"{name}: a parameter twice"


def test_a_choice_parameter_names_its_choices_when_refusing() -> None:
    from asap_ros.config.node_params import MOCAP_PARAMS, RECORDER_PARAMS

    mode = next(spec for spec in MOCAP_PARAMS if spec.name == "mode")
    assert check_value(mode, "topic", "params") == "topic"
    with pytest.raises(ConfigError, match=r"params: mode: must be one of vicon, topic \(got 'optitrack'\)"):
        check_value(mode, "optitrack", "params")
    with pytest.raises(ConfigError, match="non-empty string"):
        check_value(mode, "", "params")
    assert mode.constraint_text() == "one of vicon, topic"
    compression = next(spec for spec in RECORDER_PARAMS if spec.name == "compression")
    with pytest.raises(ConfigError, match=r"compression: must be one of zstd, lz4, none \(got 'rar'\)"):
        check_value(compression, "rar", "params")


def test_the_recorder_compressions_are_those_the_bag_writer_knows() -> None:
    from asap_ros.config.node_params import RECORDER_COMPRESSIONS
    from asap_ros.recording.bag_writer import COMPRESSIONS

    assert RECORDER_COMPRESSIONS == tuple(COMPRESSIONS)


def test_a_damping_rate_below_25_hz_is_refused() -> None:
    """Below 25 Hz the supervisor's write period passes the 40 ms its takeover timing counts on:
    it would never write (N9)."""
    spec = next(s for s in SUPERVISOR_PARAMS if s.name == "damping_rate_hz")
    assert check_value(spec, 25.0, "supervisor.yaml") == 25.0
    with pytest.raises(ConfigError, match=r"damping_rate_hz: out of range: allowed 25 <= value <= 1000 \(got 20\.0\)"):
        check_value(spec, 20.0, "supervisor.yaml")


@pytest.mark.parametrize(("name", "low"), [("lease_ms", 50.0), ("command_timeout_ms", 10.0)])
def test_the_deploy_nodes_lease_cap_and_command_timeout_are_checked(name: str, low: float) -> None:
    spec = DEPLOY[name]
    with pytest.raises(ConfigError, match=rf"{name}: out of range"):
        check_value(spec, low / 2, "deploy.yaml")
