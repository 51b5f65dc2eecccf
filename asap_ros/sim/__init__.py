"""The simulated G1 (``asap_sim``): MuJoCo physics, motor model, robot profiles, hg DDS bridge,
simulated mocap; and the sim run's orchestration (:mod:`.session`, :mod:`.summary`, :mod:`.video`)."""
