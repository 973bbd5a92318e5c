"""What a sweep may vary of the input pipeline: host parameters (`host.cpu_cores`, or
`host.` and a dotted path into the host file) and the workload's dataset and loader
(`dataset.bytes_per_sample`, `loader.workers`: paths under the workload's data.dataset and
data.loader). Each edits a copy of the file as given, which is then loaded as such a file is,
so an impossible value fails the way a bad file does."""

from __future__ import annotations

import copy
from typing import Any

from simulator import resources
from simulator.config.host import Host, parse_host
from simulator.config.loader import load, validate
from simulator.config.workload import WorkloadSpec, parse_workload
from simulator.errors import InputError
from simulator.sweep.params import describe, set_path

HOST_PREFIX, DATASET_PREFIX, LOADER_PREFIX = "host.", "dataset.", "loader."
# short name -> path in the host file
HOST_ALIASES = {
    "host.cpu_cores": "cpu.cores",
    "host.ram_GiB": "memory.ram_GiB",
    "host.storage_devices": "storage.devices",
    "host.storage_nodes": "network.nodes",
    "host.pcie_generation": "pcie.generation",
    "host.pcie_lanes": "pcie.lanes",
}


def is_host_param(name: str) -> bool:
    return name.startswith(HOST_PREFIX)


def is_data_param(name: str) -> bool:
    return name.startswith((DATASET_PREFIX, LOADER_PREFIX))


def is_feed_param(name: str) -> bool:
    return is_host_param(name) or is_data_param(name)


def _host_path(name: str) -> list[str]:
    path = HOST_ALIASES.get(name, name[len(HOST_PREFIX):])
    if not path:
        raise InputError(f"'{name}': expected host.NAME, one of {', '.join(HOST_ALIASES)} or "
                         "host. and a dotted path into the host file")
    return path.split(".")


def apply_host(raw: dict, settings: dict[str, Any], where: str) -> Host:
    """The host with the `host.` settings applied, checked as a host file is."""
    edited = copy.deepcopy(raw)
    for name, value in settings.items():
        set_path(edited, _host_path(name), value, name, where, "host file")
    try:
        validate(edited, "host", where)
        return parse_host(edited, f"{raw['name']}.json")
    except InputError as exc:
        raise InputError(f"{exc.message} (with {describe(settings)} on {raw['name']})",
                         file=where,
                         path=exc.path) from None


def apply_data(workload: str, settings: dict[str, Any], where: str) -> WorkloadSpec:
    """The workload with the `dataset.` and `loader.` settings applied to its data.dataset and
    data.loader, checked as a workload file is."""
    path = resources.resolve("workloads", workload)
    raw = load(path, "workload")
    if settings and "dataset" not in raw.get("data", {}):
        raise InputError(f"'{next(iter(settings))}' changes the dataset, and {workload} has "
                         "none (its inputs are synthetic)", file=where)
    edited = copy.deepcopy(raw)
    for name, value in settings.items():
        prefix, _, rest = name.partition(".")
        if not rest:
            raise InputError(f"'{name}': expected {prefix}.NAME", file=where)
        set_path(edited["data"], [prefix, *rest.split(".")], value, name, where,
                 "workload's data")
    try:
        validate(edited, "workload", where)
        return parse_workload(edited, str(path))
    except InputError as exc:
        raise InputError(f"{exc.message} (with {describe(settings)} on {workload})",
                         file=where,
                         path=exc.path) from None
