"""Motion capture: root pose of the robot from Vicon (DataStream SDK) or another driver's topic.

``velocity`` estimates twist by finite differences, ``vicon`` wraps the SDK client,
``vicon_standin`` serves a scripted trajectory through the SDK's API for tests, ``config``
reads ``config/mocap.yaml``. The ROS node is :mod:`asap_ros.ros.mocap_node`.
"""
