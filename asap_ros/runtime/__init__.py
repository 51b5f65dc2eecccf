"""The runtime around the pure control step: clocks, the control loop's wiring, test support hooks."""
