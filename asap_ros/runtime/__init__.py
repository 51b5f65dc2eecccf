"""The runtime around the pure control step: DDS adapters, the control loop, write arbitration."""
