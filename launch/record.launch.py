"""robot.launch.py (or sim.launch.py with sim:=true) plus the recorder and motion capture.

    ros2 launch asap_ros record.launch.py network_interface:=eth0 vicon_host:=192.168.123.200:801
    ROS_DOMAIN_ID=7 ros2 launch asap_ros record.launch.py sim:=true mocap_mode:=topic
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition, UnlessCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare("asap_ros")
    sim = LaunchConfiguration("sim")
    return LaunchDescription([
        DeclareLaunchArgument("sim", default_value="false", description="true: simulated G1 (sim.launch.py)"),
        DeclareLaunchArgument("network_interface", default_value="eth0", description="NIC on the G1's network"),
        DeclareLaunchArgument("mocap_mode", default_value="vicon", description="vicon or topic (relay mocap/input)"),
        DeclareLaunchArgument("vicon_host", default_value="192.168.123.200:801", description="Vicon DataStream server"),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([share, "launch", "robot.launch.py"])),
            launch_arguments={"network_interface": LaunchConfiguration("network_interface")}.items(),
            condition=UnlessCondition(sim),
        ),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(PathJoinSubstitution([share, "launch", "sim.launch.py"])),
            condition=IfCondition(sim),
        ),
        Node(
            package="asap_ros",
            executable="asap_recorder",
            name="asap_recorder",
            output="screen",
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
