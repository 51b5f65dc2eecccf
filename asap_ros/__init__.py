"""asap_ros: robot-side runtime for ASAP motion-tracking actors on the Unitree G1."""

__version__ = "0.1.0"
