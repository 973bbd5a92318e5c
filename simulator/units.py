"""Unit conversions, in one place. Names say the unit: GB = 1e9 B, GiB = 2**30 B."""

from __future__ import annotations

GB = 1e9
GiB = 2**30
MiB = 2**20
KiB = 2**10
TERA = 1e12
GIGA = 1e9

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


def fmt_bytes(n: float) -> str:
    """Human-readable binary size, e.g. '1.03 GiB'."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def fmt_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.2f} us"


def fmt_flops(f: float) -> str:
    for unit, size in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if abs(f) >= size:
            return f"{f / size:.2f} {unit}"
    return f"{f:.0f} FLOP"
