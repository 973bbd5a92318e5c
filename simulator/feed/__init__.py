"""The input pipeline: storage, page cache, loader workers, the host link and the GPU consuming
one batch per step, as a simpy simulation (simulation.py) over per-sample costs (costs.py),
with what-if remedies (analysis.py)."""
