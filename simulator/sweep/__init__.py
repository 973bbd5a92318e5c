"""What-if hardware sweeps: a grid of hardware settings x workloads, each point through the
same pipeline as `run`, in parallel, persisted point by point (spec.py, execute.py, report.py)."""
