"""robot.launch.py (or sim.launch.py with sim:=true) plus the recorder and motion capture.

    ros2 launch asap_ros record.launch.py network_interface:=eth0 vicon_host:=192.168.123.200:801
    ROS_DOMAIN_ID=7 ros2 launch asap_ros record.launch.py sim:=true network_interface:=lo dds_domain:=7 mocap_mode:=topic
"""

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition, UnlessCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare("asap_ros")
    sim = LaunchConfiguration("sim")
    interface, domain = LaunchConfiguration("network_interface"), LaunchConfiguration("dds_domain")
    return LaunchDescription([
        DeclareLaunchArgument("sim", default_value="false", description="true: simulated G1 (sim.launch.py)"),
        DeclareLaunchArgument("network_interface", default_value="eth0", description="NIC of the G1's network (sim: lo)"),
        DeclareLaunchArgument("dds_domain", default_value="0", description="unitree DDS domain (sim: $ROS_DOMAIN_ID)"),
        DeclareLaunchArgument("mocap_mode", default_value="vicon", description="vicon or topic (relay mocap/input)"),
        DeclareLaunchArgument("vicon_host", default_value="192.168.123.200:801", description="Vicon DataStream server"),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([share, "launch", "robot.launch.py"])),
            launch_arguments={"network_interface": interface, "dds_domain": domain}.items(),
            condition=UnlessCondition(sim),
        ),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([share, "launch", "sim.launch.py"])),
            launch_arguments={"dds_domain": domain}.items(),
            condition=IfCondition(sim),
        ),
        Node(
            package="asap_ros",
            executable="asap_recorder",
            name="asap_recorder",
            output="screen",
            parameters=[
                PathJoinSubstitution([share, "config", "recorder.yaml"]),
                {"network_interface": interface, "dds_domain": ParameterValue(domain, value_type=int)},
            ],
        ),
        Node(
            package="asap_ros",
            executable="asap_mocap",
            name="asap_mocap",
            output="screen",
            parameters=[
                PathJoinSubstitution([share, "config", "mocap.yaml"]),
                {"mode": LaunchConfiguration("mocap_mode"), "host": LaunchConfiguration("vicon_host")},
            ],
        ),
    ])
