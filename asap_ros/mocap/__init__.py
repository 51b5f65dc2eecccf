"""Motion capture: root pose of the robot from Vicon (DataStream SDK) or another driver's topic.

``velocity`` estimates twist by finite differences, ``vicon`` wraps the SDK client
(:mod:`asap_ros.testing.vicon_standin` serves a scripted trajectory through the SDK's API for
tests). The ROS node
(parameters in ``config/mocap.yaml``) is :mod:`asap_ros.ros.mocap_node`.
"""
