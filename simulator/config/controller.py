"""Memory-controller settings: plain data, and the one place that decides which controller a
card runs on (every path, the Python API, `run`, `dram` and sweeps, runs the one decided here
as the hardware file is loaded).

A hardware file may state its own `memory.controller` block (the validation cards do, to
match the simulators they are checked against). Otherwise the card runs on the GPU memory
path, GPU_CONTROLLER below.

The GPU memory path. A GPU keeps far more requests in flight than a CPU-style controller: the
L2 slices queue misses and hold dirty lines until they are written back in long batches.
Modelled as deep per-channel read and write queues (Little's law: 256 x 32 B per channel in
flight covers about 500 ns of latency at full rate), writes drained in batches of about 230
(from 95 % to 50 % of a 512-entry queue), with per-bank refresh as GDDR6 GPUs use (postponed
while its bank is busy, up to the controller's `refresh_postpone`, then given the bank).
FR-FCFS keeps a bank's row open while requests for it are queued (the hit guard: GPU
schedulers serve a row's requests before closing it, as GPGPU-Sim's FR-FCFS does). Ramulator
2's FR-FCFS takes the oldest ready command, so it precharges a row for an older request
whenever that precharge is ready before the row's next read: with nRTP equal to nCCDL (the
14 Gb/s datasheet set) in the very cycle the read could issue, with nRTP below it (10 Gb/s) a
cycle before. All along two streams that cost the 24 GB cards 9 % of their peak, and the T4
2 %. Each channel's queues fill from its own requests (per-channel front ends): the crossbar
feeds every memory partition from its own L2 slices, so a full queue holds back that
partition's misses, not the whole GPU's. One setting for every card; the card-specific part
is its organisation, timing and address mapping (the file's `memory.address_mapping` where its
maker documents one). benchmarks/stream_fidelity.py compares the result with sustained
bandwidth measured on three cards.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields

from simulator.config.address_mapping import AddressMapping

# Each policy's names, in one place: the schema's enums are checked against these (tests).
# frfcfs: ready commands first, then oldest (Ramulator 2's); frfcfs_hit_guard: the same, but a
# bank is not precharged while requests for its open row are queued; fcfs: oldest first
SCHEDULERS = ("frfcfs", "frfcfs_hit_guard", "fcfs")
# open: rows stay open; closed: auto-precharge (RDA/WRA)
PAGE_POLICIES = ("open", "closed")
# all_bank: REFab every nREFI; per_bank: REFpb to each bank in turn, every nREFI / banks
REFRESH_MODES = ("all_bank", "per_bank")
# in_order: requests enter in trace order, the first to find its buffer full holding back all
# behind it (a trace-driven simulator's front end); per_channel: each channel takes its own
# requests in order, a full buffer holding back only that channel's (a GPU's memory
# partitions, each fed by the crossbar from its own L2 slices)
FRONTENDS = ("in_order", "per_channel")
POLICIES = {"scheduler": SCHEDULERS, "page_policy": PAGE_POLICIES, "refresh": REFRESH_MODES,
            "frontend": FRONTENDS}


class SettingError(ValueError):
    """An impossible controller setting, naming the setting (a hardware file's error points
    to it as `$.memory.controller.SETTING`)."""

    def __init__(self, setting: str, expected: str):
        super().__init__(f"{setting}: {expected}")
        self.setting, self.expected = setting, expected


@dataclass(frozen=True)
class ControllerConfig:
    """Per channel. The defaults are Ramulator 2's generic controller with FR-FCFS, open page
    (what a hardware file's `memory.controller` block starts from)."""

    read_buffer: int = 32
    write_buffer: int = 32
    active_buffer: int = 32          # requests whose row was opened for them: served first
    write_high_watermark: float = 0.8  # switch to writes when the write buffer is fuller than this
    write_low_watermark: float = 0.2   # ... back to reads below this, with a read waiting
    scheduler: str = "frfcfs"
    page_policy: str = "open"
    refresh: str = "all_bank"
    # per_bank: the REFpb a channel may owe while their bank is busy; one more, and the bank
    # due takes no reads or writes until refreshed (all-bank refresh blocks the channel at once)
    refresh_postpone: int = 8
    frontend: str = "in_order"
    mapping: AddressMapping = field(default_factory=AddressMapping)

    def __post_init__(self):
        """SettingError (a ValueError) for an unknown policy or an impossible setting: the
        Python API gets the same refusal a hardware file gets, never a silent default."""
        for name, allowed in POLICIES.items():
            if getattr(self, name) not in allowed:
                raise SettingError(name, f"expected one of {', '.join(allowed)}, got "
                                         f"{getattr(self, name)!r}")
        for name in ("read_buffer", "write_buffer", "active_buffer"):
            if int(getattr(self, name)) < 1:
                raise SettingError(name, f"expected at least 1, got {getattr(self, name)}")
        if self.refresh_postpone < 0:
            raise SettingError("refresh_postpone",
                               f"expected 0 or more, got {self.refresh_postpone}")
        low, high = self.write_low_watermark, self.write_high_watermark
        for name, value in (("write_low_watermark", low), ("write_high_watermark", high)):
            if not 0 <= value <= 1:
                raise SettingError(name, f"expected a share from 0 to 1, got {value}")
        if low >= high:
            raise SettingError("write_low_watermark", f"expected write_low_watermark < "
                                                      f"write_high_watermark ({high}), got {low}")

    def settings(self) -> dict:
        """The settings as a hardware file's `memory.controller` block states them (the
        address mapping is the file's `memory.address_mapping`)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "mapping"}

    @classmethod
    def from_dict(cls, raw: dict, mapping: AddressMapping | None = None) -> ControllerConfig:
        """From a hardware file's `memory.controller`; the mapping is the file's
        `memory.address_mapping` (a fact of the card, which every controller setting uses)."""
        return cls(**raw) if mapping is None else cls(**raw, mapping=mapping)


# The settings a controller block may state, in one place (sweeps vary them by these names)
SETTINGS = tuple(f.name for f in fields(ControllerConfig) if f.name != "mapping")

GPU_CONTROLLER = ControllerConfig(
    read_buffer=256, write_buffer=512, active_buffer=32,
    write_high_watermark=0.95, write_low_watermark=0.5,
    scheduler="frfcfs_hit_guard", page_policy="open", refresh="per_bank", frontend="per_channel")
GPU_CONTROLLER_SOURCE = ("the GPU memory path (simulator/config/controller.py): the hardware "
                         "file states none")
STATED_SOURCE = "the hardware file's memory.controller"


def effective(stated: dict | None, mapping: AddressMapping | None) -> tuple[ControllerConfig,
                                                                            str]:
    """The controller a card runs on, and where its settings come from: the file's own block
    (over ControllerConfig's defaults) when it states one, else the GPU memory path; with the
    file's address mapping either way."""
    if stated is not None:
        return ControllerConfig.from_dict(stated, mapping), STATED_SOURCE
    ctl = GPU_CONTROLLER if mapping is None else dataclasses.replace(GPU_CONTROLLER,
                                                                      mapping=mapping)
    return ctl, GPU_CONTROLLER_SOURCE
