"""The nodes' Fast DDS transports: UDPv4 only unless the environment chooses (pure, on a dict)."""

from __future__ import annotations

from asap_ros.ros.fastdds import TRANSPORTS_VARIABLE, UDP_ONLY, choose_transports


def test_an_unset_environment_gets_udp_only() -> None:
    env: dict[str, str] = {}
    line = choose_transports(env)
    assert env == {TRANSPORTS_VARIABLE: UDP_ONLY}
    assert line.startswith("Fast DDS transports UDPv4 only")


def test_the_fast_dds_rmw_named_explicitly_gets_udp_only_too() -> None:
    env = {"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}
    choose_transports(env)
    assert env[TRANSPORTS_VARIABLE] == UDP_ONLY


def test_an_operators_choice_is_kept_and_named() -> None:
    env = {TRANSPORTS_VARIABLE: "SHM"}
    assert choose_transports(env) == "Fast DDS transports SHM (set in the environment)"
    assert env == {TRANSPORTS_VARIABLE: "SHM"}


def test_an_xml_profile_keeps_its_transports() -> None:
    for variable in ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE"):
        env = {variable: "/etc/fastdds.xml"}
        assert choose_transports(env) == f"Fast DDS transports from the XML profile /etc/fastdds.xml ({variable})"
        assert TRANSPORTS_VARIABLE not in env


def test_another_rmw_is_left_alone() -> None:
    env = {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}
    assert choose_transports(env) == "rmw rmw_cyclonedds_cpp: DDS transports as it configures them"
    assert env == {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}
