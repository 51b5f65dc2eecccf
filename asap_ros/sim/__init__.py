"""The simulated G1 (``asap_sim``): MuJoCo physics, motor model, robot profiles, hg DDS bridge."""
