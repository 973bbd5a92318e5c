"""How many thread blocks an SM holds at once: with the SM count, how much work is in flight.

A kernel that gives each block one row (layer norm, softmax over long rows) has as many rows
in flight as the card holds blocks; what those rows' bytes are against the L2 decides whether
a second pass over a row finds it still cached (gpu/l2.py). The limits are the compute
capability's (NVIDIA CUDA C++ Programming Guide, "Technical Specifications per Compute
Capability": maximum resident threads and resident blocks per SM), keyed here by the chip
family the hardware file names. Registers and shared memory can lower it further; the row
kernels this serves use few of either, so the thread and block limits decide.
"""

from __future__ import annotations

from simulator.config.hardware import Hardware

# chip-name prefix -> (compute capability, resident threads per SM, resident blocks per SM);
# the longest matching prefix wins
_SM_LIMITS: dict[str, tuple[str, int, int]] = {
    "GP10": ("6.1", 2048, 32),   # Pascal: GP102, GP104 (Tesla P4, P40)
    "GP100": ("6.0", 2048, 32),
    "GV100": ("7.0", 2048, 32),  # Volta
    "TU": ("7.5", 1024, 16),     # Turing
    "GA100": ("8.0", 2048, 32),  # Ampere, data centre
    "GA10": ("8.6", 1536, 16),   # Ampere, GA102 to GA107
    "AD": ("8.9", 1536, 24),     # Ada
    "GH": ("9.0", 2048, 32),     # Hopper
}


def chip_limits(chip: str) -> tuple[str, int, int] | None:
    """(compute capability, resident threads per SM, resident blocks per SM) of an NVIDIA
    chip; None for a chip not in the table."""
    chip = chip.upper()
    matches = [p for p in _SM_LIMITS if chip.startswith(p)]
    return _SM_LIMITS[max(matches, key=len)] if matches else None


def blocks_on_card(chip: str, sm_count: int, block_threads: int) -> int | None:
    """Blocks of `block_threads` threads a card of `sm_count` SMs of this chip holds at once
    (None: not known)."""
    limits = chip_limits(chip)
    if limits is None or sm_count <= 0 or block_threads <= 0:
        return None
    _, threads, blocks = limits
    return sm_count * max(1, min(threads // block_threads, blocks))


def resident_blocks(hw: Hardware, block_threads: int) -> int | None:
    """Blocks of `block_threads` threads the card holds at once (None: not known, as for
    AMD's chips, whose compute units schedule otherwise)."""
    if hw.vendor != "NVIDIA" or not hw.chip or not hw.sm_count:
        return None
    return blocks_on_card(hw.chip, hw.sm_count, block_threads)
