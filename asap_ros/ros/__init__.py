"""rclpy nodes of asap_ros: asap_deploy, asap_supervisor, asap_recorder, asap_mocap."""
