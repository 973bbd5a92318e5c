"""What a sweep may vary: named hardware parameters, each a place in the hardware file.

A parameter is a short name (`data_rate_gbps`, `l2_bytes`, `nCL`, `fp32`) or a dotted path
into the hardware JSON (`memory.timing.cycles_ck.nRCDRD`). Setting one edits a copy of the
card's raw description, which is then loaded like any hardware file (schema, organisation and
timing checks), so an impossible value fails the way a bad file does. Changing the bus width
or clamshell mode changes the number of devices with it, so the devices still fill the bus.
"""

from __future__ import annotations

import copy
from typing import Any

from simulator.config.controller import GPU_CONTROLLER, SETTINGS
from simulator.config.hardware import (
    GDDR_TYPES,
    PEAK_KEYS,
    Hardware,
    parse_hardware,
)
from simulator.config.loader import schema, validate
from simulator.errors import InputError
from simulator.gpu.clocks import rated_boost_mhz

# short name -> path in the hardware file
ALIASES = {
    "data_rate_gbps": "memory.data_rate_gbps",
    "bus_width_bits": "memory.bus_width_bits",
    "device_density_gbit": "memory.device_density_gbit",
    "clamshell": "memory.clamshell",
    "energy_pj_per_bit": "memory.energy_pj_per_bit",
    "l2_bytes": "cache.l2_bytes",
    "l2_bandwidth_GBps": "cache.l2_bandwidth_GBps",
    "sm_count": "compute.sm_count",
    "boost_clock_mhz": "compute.clocks_mhz.boost",
    "sustained_clock_mhz": "compute.clocks_mhz.sustained",
    "ecc": "memory.ecc",
    "kernel_launch_overhead_us": "compute.kernel_launch_overhead_us",
    "price_usd": "price_usd",
    "tdp_w": "tdp_w",
}


def _timing_names() -> tuple[str, ...]:
    t = schema("hardware")["$defs"]["gddr6_timing"]["properties"]["cycles_ck"]
    return tuple(t["properties"])


def resolve(name: str) -> str:
    """The dotted path a parameter name stands for."""
    if name in ALIASES:
        return ALIASES[name]
    if name in PEAK_KEYS:
        return f"compute.peak_tflops.{name}"
    if name in _timing_names():
        return f"memory.timing.cycles_ck.{name}"
    if name in SETTINGS:
        return f"memory.controller.{name}"
    if "." in name:
        return name
    known = sorted(ALIASES) + list(PEAK_KEYS) + list(_timing_names()) + list(SETTINGS)
    raise InputError(f"unknown hardware parameter '{name}'; expected a dotted path into the "
                     f"hardware file or one of: {', '.join(known)}")


def apply(raw: dict, settings: dict[str, Any], where: str, compared: bool = False) -> Hardware:
    """A card with the settings applied, checked as a hardware file is; `where` names the
    point in errors (`compared`: one of several cards, which they name too)."""
    edited = copy.deepcopy(raw)
    for name, value in settings.items():
        path = resolve(name).split(".")
        if path[:2] in (["memory", "timing"], ["memory", "controller"]) \
                and raw["memory"]["type"] not in GDDR_TYPES:
            raise InputError(f"'{name}' is a setting of the GDDR6 engine; {raw['name']} has "
                             f"{raw['memory']['type']} memory, which runs on the analytic "
                             f"roofline only", file=where)
        if path[:2] == ["memory", "controller"] and "controller" not in edited["memory"]:
            # a card that states no controller runs on the GPU memory path: the setting
            # changes that one (a block of its own would start from the generic controller)
            edited["memory"]["controller"] = GPU_CONTROLLER.settings()
        set_path(edited, path, value, name, where, "hardware file")
        if path[-1] in ("bus_width_bits", "clamshell") and path[0] == "memory":
            _fill_bus(edited["memory"])
    try:
        _fill_boost(edited, f"{raw['name']}.json", where)
        validate(edited, "hardware", where)
        return parse_hardware(edited, f"{raw['name']}.json")
    except InputError as exc:
        on = f" on {raw['name']}" if compared else ""
        raise InputError(f"{exc.message} (with {describe(settings)}{on})", file=where,
                         path=exc.path) from None


def _fill_boost(edited: dict, name: str, where: str) -> None:
    """A sustained clock set on a card whose file states no clocks: the boost clock beside it
    is the one its peaks are counted at (gpu/clocks.py rated_boost_mhz), so that a GeForce
    board's own clock can be tried without writing a file."""
    clocks = edited.get("compute", {}).get("clocks_mhz")
    if not isinstance(clocks, dict) or "boost" in clocks or "sustained" not in clocks:
        return
    probe = copy.deepcopy(edited)
    del probe["compute"]["clocks_mhz"]
    validate(probe, "hardware", where)
    boost = rated_boost_mhz(parse_hardware(probe, name))
    if boost is None:
        raise InputError("a sustained clock needs the boost clock its peaks are counted at, "
                         "which this card's file does not state and its FP32 lanes per SM do "
                         "not give; vary boost_clock_mhz too", path="$.compute.clocks_mhz")
    clocks["boost"] = round(boost, 1)


def _fill_bus(m: dict) -> None:
    """A new bus or clamshell mode: the devices are derived again as the file loads (a bus
    they cannot fill is the loader's error)."""
    m.pop("devices", None)


def set_path(node: dict, path: list[str], value: Any, name: str, where: str,
             what: str) -> None:
    """Set `path` in a JSON document to `value`, making the objects on the way; parameter
    `name` names the setting in the error where a step of the path is not an object."""
    for key in path[:-1]:
        if not isinstance(node.get(key, {}), dict):
            raise InputError(f"'{name}': {'.'.join(path)} is not an object path in the {what}",
                             file=where)
        node = node.setdefault(key, {})
    node[path[-1]] = value


def describe(settings: dict[str, Any]) -> str:
    """Settings as errors name them: `a=1, b=2`."""
    return ", ".join(f"{k}={v}" for k, v in settings.items())
