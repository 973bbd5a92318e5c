"""Memory-controller settings: plain data, read from the hardware file's `memory.controller`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from simulator.dram.mapping import AddressMapping


@dataclass(frozen=True)
class ControllerConfig:
    """Per channel. Defaults are Ramulator 2's generic controller with FR-FCFS, open page."""

    read_buffer: int = 32
    write_buffer: int = 32
    active_buffer: int = 32          # requests whose row was opened for them: served first
    write_high_watermark: float = 0.8  # switch to writes when the write buffer is fuller than this
    write_low_watermark: float = 0.2   # ... back to reads below this, with a read waiting
    # frfcfs: ready commands first, then oldest (Ramulator 2's); frfcfs_hit_guard: the same,
    # but a bank is not precharged while requests for its open row are queued; fcfs: oldest
    scheduler: str = "frfcfs"
    page_policy: str = "open"        # open: rows stay open; closed: auto-precharge (RDA/WRA)
    refresh: str = "all_bank"        # all_bank: REFab every nREFI; per_bank: REFpb every nREFI/16
    # per_bank: the REFpb a channel may owe while their bank is busy; one more, and the bank
    # due takes no reads or writes until refreshed (all-bank refresh blocks the channel at once)
    refresh_postpone: int = 8
    # in_order: requests enter in trace order, the first to find its buffer full holding back
    # all behind it (a trace-driven simulator's front end); per_channel: each channel takes its
    # own requests in order, a full buffer holding back only that channel's (a GPU's memory
    # partitions, each fed by the crossbar from its own L2 slices)
    frontend: str = "in_order"
    mapping: AddressMapping = field(default_factory=AddressMapping)

    def settings(self) -> dict:
        """The settings as a hardware file's `memory.controller` block states them (the
        address mapping is the file's `memory.address_mapping`)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "mapping"}

    @classmethod
    def from_dict(cls, raw: dict, mapping: AddressMapping | None = None) -> ControllerConfig:
        """From a hardware file's `memory.controller`; the mapping is the file's
        `memory.address_mapping` (a fact of the card, which every controller setting uses)."""
        return cls(**raw) if mapping is None else cls(**raw, mapping=mapping)
