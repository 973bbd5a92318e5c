"""GDDR6 roofline simulator for deep-learning training.

The Python API, as the README shows it:

    from simulator import analyze
    r = analyze("resnet50", "a10", host="nvme-workstation")
    r.estimate.step_time_s, r.memory.peak_bytes, r.fits, r.feed.bound

`analyze` runs one training step of a workload on a card (a `RunResult`: the trace, its
`MemoryProfile`, the `StepEstimate` and, with a host, the input pipeline's `FeedResult`);
`load_hardware`, `load_workload` and `load_host` read and check the JSON files (a shipped name or
a path), raising `InputError` with the file, the JSON path and what was expected.

The names are imported on first use, so that `python -m simulator` starts without loading the
simulation's dependencies.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# name -> the module that defines it
_API = {
    "analyze": "simulator.pipeline",
    "RunResult": "simulator.pipeline",
    "Step": "simulator.pipeline",
    "StepEstimate": "simulator.estimate",
    "OpTime": "simulator.estimate",
    "MemoryProfile": "simulator.workload.memory",
    "FeedResult": "simulator.feed.analysis",
    "Hardware": "simulator.config.hardware",
    "load_hardware": "simulator.config.hardware",
    "WorkloadSpec": "simulator.config.workload",
    "load_workload": "simulator.config.workload",
    "Host": "simulator.config.host",
    "load_host": "simulator.config.host",
    "InputError": "simulator.errors",
}

__all__ = ["FeedResult", "Hardware", "Host", "InputError", "MemoryProfile", "OpTime",
           "RunResult", "Step", "StepEstimate", "WorkloadSpec", "analyze", "load_hardware",
           "load_host", "load_workload"]

if TYPE_CHECKING:  # (for type checkers and editors; at run time __getattr__ imports them)
    from simulator.config.hardware import Hardware, load_hardware
    from simulator.config.host import Host, load_host
    from simulator.config.workload import WorkloadSpec, load_workload
    from simulator.errors import InputError
    from simulator.estimate import OpTime, StepEstimate
    from simulator.feed.analysis import FeedResult
    from simulator.pipeline import RunResult, Step, analyze
    from simulator.workload.memory import MemoryProfile


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'simulator' has no attribute '{name}'")
    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
