"""path_cpu.py: where a one-step run's wall time and CPU go, function by function."""
