"""Loading and checking the plain-data inputs: hardware, workload (and later sweep) files."""
