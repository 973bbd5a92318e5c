"""GDDR6 organization per 16-bit channel: bank groups, banks, rows, and 32 B accesses per row.

Rows and page size by device density (JESD250 Table 19, as transcribed in Ramulator 2's GDDR6
org presets). In x8 clamshell each channel is two x8 devices in lockstep, so a channel row is
two device pages wide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulator.errors import InputError
from simulator.units import BITS_PER_BYTE, BITS_PER_PIN_PER_CK

if TYPE_CHECKING:
    from simulator.config.hardware import MemorySpec

BANK_GROUPS = 4
BANKS_PER_GROUP = 4
CHANNEL_WIDTH_BITS = 16
CHANNELS_PER_DEVICE = 2  # two independent channels per device (JESD250 x16 mode)
BURST_LENGTH = 16
ACCESS_BYTES = CHANNEL_WIDTH_BITS * BURST_LENGTH // BITS_PER_BYTE  # 32 B: BL16, 16-bit channel
# the CK cycles one access holds the data bus: its nBL, fixed by the interface (2)
BURST_CK = BURST_LENGTH // BITS_PER_PIN_PER_CK

# density (Gbit) -> (rows, device page bytes) for x16 and x8 devices
_PRESETS = {
    ("x16", 8): (1 << 14, 2048), ("x16", 16): (1 << 14, 4096), ("x16", 32): (1 << 15, 4096),
    ("x8", 8): (1 << 14, 2048), ("x8", 16): (1 << 15, 2048), ("x8", 32): (1 << 16, 2048),
}


@dataclass(frozen=True)
class Organization:
    channels: int
    bank_groups: int
    banks_per_group: int
    rows: int
    row_bytes: int        # one channel's page (both devices in clamshell)

    @property
    def banks(self) -> int:
        return self.bank_groups * self.banks_per_group

    @property
    def columns(self) -> int:
        """32 B accesses per row."""
        return self.row_bytes // ACCESS_BYTES

    @property
    def channel_bytes(self) -> int:
        return self.banks * self.rows * self.row_bytes

    @property
    def capacity_bytes(self) -> int:
        return self.channels * self.channel_bytes


def organization(memory: MemorySpec, file: str = "") -> Organization:
    width = "x8" if memory.clamshell else "x16"
    density = memory.device_density_gbit
    key = (width, int(density)) if float(density).is_integer() else None
    if key not in _PRESETS:
        raise InputError(f"expected a GDDR6 density of 8, 16 or 32 Gb, got {density:g}",
                         file=file, path="$.memory.device_density_gbit")
    rows, page = _PRESETS[key]
    row_bytes = page * (2 if memory.clamshell else 1)
    return Organization(memory.channels, BANK_GROUPS, BANKS_PER_GROUP, rows, row_bytes)
