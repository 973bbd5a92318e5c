"""Unit conversions, in one place. Names say the unit: GB = 1e9 B, GiB = 2**30 B."""

from __future__ import annotations

GB = 1e9
MB = 1e6
GiB = 2**30
MiB = 2**20
KiB = 2**10
TERA = 1e12
GIGA = 1e9
MEGA = 1e6  # Hz per MHz

BITS_PER_BYTE = 8
BITS_PER_PIN_PER_CK = 8  # GDDR6: each DQ pin moves 8 bits per CK cycle (data rate = 8 x f_CK)


def gbit_to_bytes(gbit: float) -> int:
    """Device densities are quoted in Gbit with binary prefixes (8 Gb = 2**33 bits)."""
    return int(round(gbit * GiB / BITS_PER_BYTE))


def peak_bandwidth_GBps(bus_width_bits: int, data_rate_gbps: float) -> float:
    """Peak DRAM bandwidth in GB/s (1e9 B/s): every pin moves `data_rate_gbps` Gbit/s."""
    return bus_width_bits * data_rate_gbps / BITS_PER_BYTE


def ck_frequency_GHz(data_rate_gbps: float) -> float:
    """GDDR6 command clock CK (see BITS_PER_PIN_PER_CK)."""
    return data_rate_gbps / BITS_PER_PIN_PER_CK


def wck_frequency_GHz(data_rate_gbps: float, wck_mode: str) -> float:
    """GDDR6 write clock WCK: data rate = 4 x f_WCK in QDR mode, 2 x f_WCK in DDR mode."""
    return data_rate_gbps / (4.0 if wck_mode == "QDR" else 2.0)


def tck_ns(data_rate_gbps: float) -> float:
    """CK period in ns."""
    return 1.0 / ck_frequency_GHz(data_rate_gbps)


def byte_unit(n: float) -> tuple[str, int]:
    """The binary unit a size reads best in: (name, bytes in one)."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= size:
            return unit, size
    return "B", 1


def fmt_bytes(n: float) -> str:
    """Human-readable binary size, e.g. '1.03 GiB'."""
    unit, size = byte_unit(n)
    return f"{n / size:.2f} {unit}" if size > 1 else f"{int(n)} B"


def time_unit(s: float) -> tuple[str, float]:
    """The unit a duration reads best in: (name, seconds in one)."""
    if s >= 1:
        return "s", 1.0
    if s >= 1e-3:
        return "ms", 1e-3
    return "us", 1e-6


def fmt_seconds(s: float) -> str:
    unit, size = time_unit(s)
    return f"{s / size:.{2 if unit == 'us' else 3}f} {unit}"


def fmt_share(x: float) -> str:
    """A share (0.25) as a percentage ('25.0 %')."""
    return f"{x * 100:.1f} %"


def fmt_flops(f: float) -> str:
    for unit, size in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if abs(f) >= size:
            return f"{f / size:.2f} {unit}"
    return f"{f:.0f} FLOP"
