"""Node parameters: YAML defaults, typed validation, start-up refusal, runtime rejection."""

from __future__ import annotations

import pytest
import rclpy
from rclpy.parameter import Parameter

from asap_ros.config.node_params import DEPLOY_PARAMS, SUPERVISOR_PARAMS, ParamSpec, check_value, load_defaults
from asap_ros.config.paths import config_file
from asap_ros.core.errors import ConfigError
from asap_ros.ros.parameters import NodeParams

RATE = ParamSpec("rate_hz", "float", "a rate", low=1.0, high=100.0, runtime=True)
SPECS = (
    ParamSpec("interface", "str", "network interface"),
    RATE,
    ParamSpec("priority", "int", "a priority", low=0, high=99),
    ParamSpec("files", "str_list", "some files"),
    ParamSpec("flag", "bool", "a flag", runtime=True),
    ParamSpec("override_s", "float", "0 keeps", low=0.5, high=60.0, zero_keeps=True),
)
DEFAULTS = {"interface": "lo", "rate_hz": 50.0, "priority": 0, "files": ["a.yaml"], "flag": True, "override_s": 0.0}


def test_check_value_converts_and_refuses_with_name_and_value():
    assert check_value(RATE, 50, "src") == 50.0 and isinstance(check_value(RATE, 50, "src"), float)
    with pytest.raises(ConfigError, match=r"src: rate_hz: must be a number \(got 'fast'\)"):
        check_value(RATE, "fast", "src")
    with pytest.raises(ConfigError, match=r"rate_hz: out of range: allowed 1 <= value <= 100 \(got 500"):
        check_value(RATE, 500.0, "src")
    with pytest.raises(ConfigError, match="must be a number"):
        check_value(RATE, True, "src")
    with pytest.raises(ConfigError, match="must be finite"):
        check_value(RATE, float("nan"), "src")
    spec = SPECS[5]
    assert check_value(spec, 0.0, "src") == 0.0 and check_value(spec, 2, "src") == 2.0
    with pytest.raises(ConfigError, match=r"allowed 0 \(keep the config file's value\) or 0.5 <= value <= 60"):
        check_value(spec, 0.1, "src")
    with pytest.raises(ConfigError, match="must be an integer"):
        check_value(SPECS[2], 1.5, "src")
    with pytest.raises(ConfigError, match="non-empty list of strings"):
        check_value(SPECS[3], "a.yaml", "src")
    with pytest.raises(ConfigError, match="non-empty string"):
        check_value(SPECS[0], "", "src")


@pytest.mark.parametrize("name,specs", [("asap_deploy", DEPLOY_PARAMS), ("asap_supervisor", SUPERVISOR_PARAMS)])
def test_package_params_files_are_complete_and_valid(name, specs):
    values = load_defaults(config_file(f"{name.removeprefix('asap_')}.yaml"), name, specs)
    assert set(values) == {spec.name for spec in specs}


def test_load_defaults_names_unknown_missing_and_bad_values(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("node:\n  ros__parameters:\n    interface: lo\n    rate_hz: 50.0\n    typo: 1\n")
    with pytest.raises(ConfigError, match=r"p.yaml: node.ros__parameters.typo: unknown parameter"):
        load_defaults(path, "node", SPECS[:2])
    path.write_text("node:\n  ros__parameters:\n    interface: lo\n")
    with pytest.raises(ConfigError, match=r"node.ros__parameters.rate_hz: required parameter missing"):
        load_defaults(path, "node", SPECS[:2])
    path.write_text("node:\n  ros__parameters:\n    interface: lo\n    rate_hz: '50'\n")
    with pytest.raises(ConfigError, match=r"p.yaml: rate_hz: must be a number \(got '50'\)"):
        load_defaults(path, "node", SPECS[:2])
    path.write_text("other: {}\n")
    with pytest.raises(ConfigError, match=r"node.ros__parameters: required mapping missing"):
        load_defaults(path, "node", SPECS[:2])


@pytest.fixture
def ros_context(dds_domain):
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=dds_domain)
    yield context
    rclpy.shutdown(context=context)


def make_node(context, *overrides: str):
    args = ["--ros-args", *[a for o in overrides for a in ("-p", o)]] if overrides else []
    return rclpy.create_node("params_test", context=context, cli_args=args)


def test_startup_override_of_wrong_type_or_range_is_refused(ros_context):
    for override, expected in (("rate_hz:=fast", r"rate_hz: must be a number \(got 'fast'\)"),
                               ("rate_hz:=500.0", r"rate_hz: out of range.*\(got 500.0\)"),
                               ("priority:=high", r"priority: must be an integer")):
        node = make_node(ros_context, override)
        with pytest.raises(ConfigError, match=expected) as info:
            NodeParams(node, SPECS, DEFAULTS)
        assert "ROS parameters of /params_test" in str(info.value)
        node.destroy_node()
    node = make_node(ros_context, "rate_hz:=20")  # an integer is fine for a float parameter
    assert NodeParams(node, SPECS, DEFAULTS)["rate_hz"] == 20.0
    node.destroy_node()


def test_runtime_changes_are_validated_and_rejections_leave_values_unchanged(ros_context):
    node = make_node(ros_context)
    params = NodeParams(node, SPECS, DEFAULTS)
    changes = []
    params.on_change(changes.append)

    def refuse_42(values):
        if values["rate_hz"] == 42.0:
            raise ConfigError(params.source, "rate_hz", "42 is reserved", 42.0)

    params.set_validator(refuse_42)

    def set_one(name, value):
        return node.set_parameters([Parameter(name, value=value)])[0]

    for name, value, reason in (("rate_hz", "fast", "must be a number"),
                                ("rate_hz", 0.5, "out of range"),
                                ("rate_hz", 42.0, "42 is reserved"),
                                ("interface", "eth0", "read-only"),
                                ("flag", 1, "must be true or false")):
        result = set_one(name, value)
        assert not result.successful and reason in result.reason, result.reason
    assert params.values == DEFAULTS and changes == []
    assert set_one("rate_hz", 25).successful
    assert params["rate_hz"] == 25.0 and changes == [{"rate_hz": 25.0}]
    node.destroy_node()


def test_validator_runs_at_startup(ros_context):
    node = make_node(ros_context)
    params = NodeParams(node, SPECS, DEFAULTS)

    def require_eth0(values):
        if values["interface"] != "eth0":
            raise ConfigError(params.source, "interface", "must be eth0", values["interface"])

    with pytest.raises(ConfigError, match=r"interface: must be eth0 \(got 'lo'\)"):
        params.set_validator(require_eth0)
    node.destroy_node()
