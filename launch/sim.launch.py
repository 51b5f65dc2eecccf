"""Simulated G1 (MuJoCo over DDS on loopback) with asap_deploy and asap_supervisor.

    ROS_DOMAIN_ID=7 ros2 launch asap_ros sim.launch.py
    ROS_DOMAIN_ID=7 ros2 launch asap_ros sim.launch.py stand_up_duration_s:=2.0

The unitree DDS domain defaults to $ROS_DOMAIN_ID so runs on one machine stay apart.
"""

from launch.actions import DeclareLaunchArgument
from launch.substitutions import EnvironmentVariable, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    config = PathJoinSubstitution([FindPackageShare("asap_ros"), "config"])
    domain = LaunchConfiguration("dds_domain")
    network = {"network_interface": "lo", "dds_domain": ParameterValue(domain, value_type=int)}
    return LaunchDescription([
        DeclareLaunchArgument("dds_domain", default_value=EnvironmentVariable("ROS_DOMAIN_ID", default_value="1"),
                              description="DDS domain of the simulator, deploy and supervisor"),
        DeclareLaunchArgument("policies", default_value="[kick_level1.yaml, CR7_level1.yaml, APT_level1.yaml]",
                              description="YAML list of policy specs"),
        DeclareLaunchArgument("default_motion", default_value="kick_level1", description="motion of ~/start"),
        DeclareLaunchArgument("stand_up_duration_s", default_value="0.0",
                              description="stand-up time (0 = config/controller.yaml)"),
        Node(
            package="asap_ros",
            executable="asap_sim",
            name="asap_sim",
            output="screen",
            arguments=["--domain", domain, "--interface", "lo"],
        ),
        Node(
            package="asap_ros",
            executable="asap_deploy",
            name="asap_deploy",
            output="screen",
            parameters=[
                PathJoinSubstitution([config, "deploy.yaml"]),
                {**network,
                 "policies": LaunchConfiguration("policies"),
                 "default_motion": LaunchConfiguration("default_motion"),
                 "stand_up_duration_s": ParameterValue(LaunchConfiguration("stand_up_duration_s"), value_type=float)},
            ],
        ),
        Node(
            package="asap_ros",
            executable="asap_supervisor",
            name="asap_supervisor",
            output="screen",
            parameters=[PathJoinSubstitution([config, "supervisor.yaml"]), network],
        ),
    ])
