"""A sweep: workloads x a grid of hardware settings, read from a file or the command line.

    {"format_version": 1, "name": "t4-memory", "hardware": "t4",
     "workloads": ["transformer", "cnn"], "fidelity": "sampled",
     "vary": {"data_rate_gbps": [12, 14, 16], "bus_width_bits": [192, 256, 384]}}

"hardware" may list several cards ("hardware": ["t4", "l4", "a10"]): they are compared on an
axis of their own, named "hardware", each with the other axes' settings applied (no "vary"
needed then). "host" adds the input pipeline: one host for every point, or several compared on
an axis of their own, named "host"; "vary" may then name host, dataset and loader parameters
too (`host.cpu_cores`, `dataset.bytes_per_sample`, `loader.workers`: sweep/feed_params.py).

Every point is built and checked before anything runs: an unknown parameter or an impossible
value (a bus the devices cannot fill, a data rate of 0, a timing set that breaks nRC >= nRAS +
nRP) is an error naming the sweep file, the axis and the value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator import resources
from simulator.config.hardware import Hardware
from simulator.config.host import Host, load_host_raw
from simulator.config.loader import load
from simulator.config.workload import load_workload
from simulator.errors import InputError
from simulator.estimate import check_fidelity
from simulator.gpu.compute import check_compute
from simulator.report.outputs import file_label
from simulator.sweep import feed_params, params


@dataclass(frozen=True)
class Point:
    """One (workload, hardware settings) pair of the grid."""

    workload: str                   # as given: a shipped name or a path
    settings: dict[str, Any]        # parameter -> value, in axis order
    hardware: Hardware = field(compare=False, repr=False)
    host: Host | None = field(default=None, compare=False, repr=False)  # the input pipeline's

    @property
    def data_settings(self) -> dict[str, Any]:
        """The dataset and loader settings the input pipeline runs with."""
        return {k: v for k, v in self.settings.items() if feed_params.is_data_param(k)}

    @property
    def id(self) -> str:
        """Stable across runs, so a rerun can tell which points are done."""
        names = [self.workload, self.hardware.name, self.settings]
        doc = json.dumps(names + ([self.host.name] if self.host else []), sort_keys=True)
        return hashlib.sha1(doc.encode()).hexdigest()[:16]


# The axis over cards: a sweep that lists several cards compares them, each point one card
# with the other axes' settings applied to it; and over hosts, likewise
CARD_AXIS = "hardware"
HOST_AXIS = "host"


@dataclass(frozen=True)
class SweepSpec:
    name: str
    cards: dict[str, dict]          # each card as given (name or path) -> its hardware file
    workloads: tuple[str, ...]
    axes: dict[str, list[Any]]      # parameter -> values (CARD_AXIS first where several cards)
    fidelity: str
    source: str                     # the sweep file, or "command line"
    hosts: dict[str, dict] = field(default_factory=dict)  # each host as given -> its file

    @property
    def hardware(self) -> str | list[str]:
        """The card's name, or the cards' names (as a sweep file gives them)."""
        names = [raw["name"] for raw in self.cards.values()]
        return names[0] if len(names) == 1 else names

    @property
    def host(self) -> str | list[str] | None:
        names = [raw["name"] for raw in self.hosts.values()]
        return None if not names else names[0] if len(names) == 1 else names

    def points(self) -> list[Point]:
        names = list(self.axes)
        only = next(iter(self.cards))
        first_host = next(iter(self.hosts), None)
        out = []
        for values in itertools.product(*self.axes.values()):
            settings = dict(zip(names, values, strict=True))
            card = self.cards[settings.get(CARD_AXIS, only)]
            changes = {k: v for k, v in settings.items()
                       if k not in (CARD_AXIS, HOST_AXIS) and not feed_params.is_feed_param(k)}
            hw = params.apply(card, changes, self.source, compared=len(self.cards) > 1)
            host = None
            if self.hosts:
                raw = self.hosts[settings.get(HOST_AXIS, first_host)]
                host = feed_params.apply_host(
                    raw, {k: v for k, v in settings.items() if feed_params.is_host_param(k)},
                    self.source)
            out += [Point(w, settings, hw, host) for w in self.workloads]
        return out


def _coerce(text: str) -> Any:
    """A value from the command line: a number, true/false, or the text itself."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def parse_vary(items: list[str]) -> dict[str, list[Any]]:
    """`--vary name=v1,v2,...` options into axes."""
    axes: dict[str, list[Any]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not name.strip() or not values.strip():
            raise InputError(f"--vary {item}: expected NAME=VALUE[,VALUE...]")
        if name.strip() in axes:
            raise InputError(f"--vary {item}: '{name.strip()}' is varied twice")
        axes[name.strip()] = [_coerce(v) for v in values.split(",")]
    return axes


def build(name: str, hardware: str | list[str], workloads: list[str],
          axes: dict[str, list[Any]], fidelity: str | None, source: str,
          host: str | list[str] | None = None) -> SweepSpec:
    """A sweep of one card, or several (a list) compared on an axis of their own, CARD_AXIS;
    with a host (or several, on HOST_AXIS) the input pipeline too; every point is built and
    checked."""
    if fidelity is not None:
        check_fidelity(fidelity, source, "$.fidelity")
    given = [hardware] if isinstance(hardware, str) else list(hardware)
    hosts_given = [] if host is None else [host] if isinstance(host, str) else list(host)
    for axis, how in ((CARD_AXIS, "cards to compare as the sweep's hardware (--hardware "
                                  "t4,l4,a10)"),
                      (HOST_AXIS, "hosts to compare as the sweep's host (--host "
                                  "hdd-server,nvme-workstation)")):
        if axis in axes:
            raise InputError(f"'{axis}' is not a setting to vary: list the {how}", file=source,
                             path=f"$.vary.{axis}")
    for listed, what, where in ((given, "cards", "$.hardware"), (hosts_given, "hosts", "$.host")):
        twice = sorted({c for c in listed if listed.count(c) > 1})
        if twice:
            raise InputError(f"expected distinct {what}, got {', '.join(twice)} more than once",
                             file=source, path=where)
    if len(hosts_given) > 1:
        axes = {HOST_AXIS: hosts_given, **axes}
    if len(given) > 1:
        axes = {CARD_AXIS: given, **axes}
    if not axes:
        raise InputError("nothing to vary: expected at least one axis, or several cards or "
                         "hosts to compare", file=source, path="$.vary")
    for axis, values in axes.items():
        if axis in (CARD_AXIS, HOST_AXIS):
            continue
        if feed_params.is_feed_param(axis):
            if not hosts_given:
                raise InputError(f"'{axis}' is a setting of the input pipeline: expected a host "
                                 "to run it on (--host NAME, or \"host\" in a sweep file)",
                                 file=source, path=f"$.vary.{axis}")
        else:
            params.resolve(axis)
        if not values:
            raise InputError(f"expected at least one value for '{axis}'", file=source,
                             path=f"$.vary.{axis}")
        twice = sorted({repr(v) for v in values if values.count(v) > 1})
        if twice:  # (each would be a point of its own, run and listed again)
            raise InputError(f"expected distinct values for '{axis}', got {', '.join(twice)} "
                             f"more than once", file=source, path=f"$.vary.{axis}")
    cards = _load_cards(given, source)
    hosts = _load_hosts(hosts_given, source)
    from simulator.feed.analysis import check_feedable

    for w in workloads:
        spec_w = load_workload(w)   # unknown or broken workloads fail here, not in a worker
        if hosts:
            check_feedable(spec_w)
    spec = SweepSpec(name, cards, tuple(workloads), axes, fidelity or "analytic", source, hosts)
    points = spec.points()  # every hardware and host point checked before anything runs
    for settings in {json.dumps(p.data_settings, sort_keys=True) for p in points}:
        for w in workloads:  # every dataset and loader setting checked, likewise
            feed_params.apply_data(w, json.loads(settings), source)
    for p in points:  # (a memory system alone: every point would fail)
        try:
            check_compute(p.hardware)
        except InputError as exc:  # named by the card's own file, not the point's name.json
            card = p.settings.get(CARD_AXIS, given[0])
            raise InputError(exc.message, file=str(resources.resolve("hardware", card)),
                             path=exc.path) from None
    return dataclasses.replace(spec, fidelity=_fidelity_for(points, fidelity, len(cards) > 1,
                                                            source))


def _load_cards(given: list[str], source: str) -> dict[str, dict]:
    """Each card's hardware file, by the name or path given; an unknown one is named by its
    place in the sweep."""
    cards = {}
    for i, card in enumerate(given):
        try:
            cards[card] = load(resources.resolve("hardware", card), "hardware")
        except InputError as exc:
            raise (exc if exc.file else InputError(
                exc.message, file=source,
                path="$.hardware" + (f"[{i}]" if len(given) > 1 else ""))) from None
    return cards


def _load_hosts(given: list[str], source: str) -> dict[str, dict]:
    hosts = {}
    for i, name in enumerate(given):
        try:
            hosts[name] = load_host_raw(name)[0]
        except InputError as exc:
            raise (exc if exc.file else InputError(
                exc.message, file=source,
                path="$.host" + (f"[{i}]" if len(given) > 1 else ""))) from None
    return hosts


def _fidelity_for(points: list[Point], fidelity: str | None, compared: bool,
                  source: str) -> str:
    """The fidelity asked for, which every point's memory must allow; or, as `run`'s
    default, sampled where the GDDR6 engine covers every card and analytic otherwise."""
    if fidelity is None:
        return "sampled" if all(p.hardware.memory.replayable for p in points) else "analytic"
    for p in points if fidelity != "analytic" else ():
        if not p.hardware.memory.replayable:
            raise InputError(
                f"{p.hardware.name} has {p.hardware.memory.type} memory, which the {fidelity} "
                "replay does not simulate (it runs GDDR6): expected fidelity analytic"
                + (", for every card compared, so that they compare like for like"
                   if compared else ""), file=source, path="$.fidelity")
    return fidelity


def load_sweep(path: Path, fidelity: str | None = None) -> SweepSpec:
    """A sweep file, checked against its JSON Schema, then every point built; `fidelity`
    overrides the file's."""
    raw = load(path, "sweep")
    where = f"{path} with --fidelity {fidelity}" if fidelity else str(path)
    try:
        return build(raw.get("name", file_label(path.name)), raw["hardware"], raw["workloads"],
                     raw.get("vary", {}), fidelity or raw.get("fidelity"), where,
                     raw.get("host"))
    except InputError as exc:
        raise exc.in_file(where) from None
