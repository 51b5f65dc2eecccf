"""Real G1: asap_deploy and asap_supervisor on the robot's network.

    ros2 launch asap_ros robot.launch.py network_interface:=eth0
    ros2 launch asap_ros robot.launch.py network_interface:=eth0 policies:="[kick_level1.yaml]" default_motion:=kick_level1
    ros2 launch asap_ros robot.launch.py network_interface:=eth0 control_cpu:=3   # core 3 kept for control

Defaults come from config/deploy.yaml and config/supervisor.yaml; the arguments override them.
"""

from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    config = PathJoinSubstitution([FindPackageShare("asap_ros"), "config"])
    network = {
        "network_interface": LaunchConfiguration("network_interface"),
        "dds_domain": ParameterValue(LaunchConfiguration("dds_domain"), value_type=int),
    }
    return LaunchDescription([
        DeclareLaunchArgument("network_interface", description="NIC on the G1's network (e.g. eth0, enp3s0)"),
        DeclareLaunchArgument("dds_domain", default_value="0", description="unitree DDS domain (the G1 uses 0)"),
        DeclareLaunchArgument("policies", default_value="[kick_level1.yaml, CR7_level1.yaml, APT_level1.yaml]",
                              description="YAML list of policy specs (package policies/ or absolute paths)"),
        DeclareLaunchArgument("default_motion", default_value="kick_level1", description="motion of ~/start"),
        DeclareLaunchArgument("estop_combo", default_value="L2+B", description="wireless-remote e-stop combo"),
        DeclareLaunchArgument("realtime_priority", default_value="80",
                              description="SCHED_FIFO priority of the control thread (needs CAP_SYS_NICE; 0 = normal)"),
        DeclareLaunchArgument("supervisor_priority", default_value="85",
                              description="SCHED_FIFO priority of the supervisor's watchdog thread"),
        DeclareLaunchArgument("supervisor_receive_priority", default_value="79",
                              description="SCHED_FIFO priority of the supervisor's DDS receive threads and beat, "
                                          "grant and rt/lowcmd readers: below the control thread"),
        DeclareLaunchArgument("control_cpu", default_value="-1",
                              description="CPU kept for the control thread alone (e.g. one in isolcpus); -1 = not pinned"),
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
                 "realtime_priority": ParameterValue(LaunchConfiguration("realtime_priority"), value_type=int),
                 "control_cpu": ParameterValue(LaunchConfiguration("control_cpu"), value_type=int)},
            ],
        ),
        Node(
            package="asap_ros",
            executable="asap_supervisor",
            name="asap_supervisor",
            output="screen",
            parameters=[
                PathJoinSubstitution([config, "supervisor.yaml"]),
                {**network, "estop_combo": LaunchConfiguration("estop_combo"),
                 "realtime_priority": ParameterValue(LaunchConfiguration("supervisor_priority"), value_type=int),
                 "receive_priority": ParameterValue(LaunchConfiguration("supervisor_receive_priority"),
                                                    value_type=int)},
            ],
        ),
    ])
