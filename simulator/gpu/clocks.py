"""The SM clock a card holds under load, and how fast GPU Boost moves it there.

Datasheet peaks count FLOP at the rated boost clock. Under a sustained load a card holds what
its power limit allows: a 70 W T4 drops to about 900 MHz of its 1590 MHz boost, while a 700 W
H200 holds its 1980 MHz. The hardware file states both clocks (`compute.clocks_mhz`, with a
source). The DRAM keeps its rated data rate (a power cap lowers the SM clock, not the memory
clock: an RTX 3090 pinned at its 315 W cap held 9501 MHz memory in every sample,
github.com/ashalliants/ninfer-3090 pull 72). The analytic fidelity keeps the datasheet peak:
it is the plain roofline.

The clock does not drop at once. A card that was idle starts a kernel at its boost clock and
sinks toward the sustained one as it stays busy; idle, it recovers. `ClockState` models this
as a first-order response, `heat` 0 (cool: boost) to 1 (at the sustained clock), with one
time constant for both directions (`POWER_RESPONSE_S`, fitted on the T4's lone GEMMs by
`benchmarks/fit_library_efficiency.py`). A training step in steady state starts hot; a lone
kernel timed after an idle pause starts cool, which is why short kernels measured alone run
near the boost clock and long ones near the sustained one.

What a card holds under its power limit depends on the values its kernels compute on: every
bit that flips draws switching power, so operands that flip few bits (zeros) let a capped card
hold a higher clock. H. He ("Strangely, Matrix Multiplications on GPUs Run Faster When Given
'Predictable' Data", thonking.ai, 2024) timed one 8192-cubed product on an A100 at its 400 W
cap: 295 TFLOP/s on `torch.zeros`, 257 on `torch.randn` (Gregersen, Patel and Choukse,
"Input-Dependent Power Usage in GPUs", SC24 workshops, arXiv:2409.18324: up to 40 % less GEMM
power with other inputs, at one clock). With switching power ~ activity x f x V^2 and the
voltage rising with the clock, the clock a cap allows goes as activity^(-1/3): the ratio
depends on the data, not on the card, and zeros lift the sustained clock by that ratio
(`ZERO_OPERAND_CLOCK_GAIN`), never above boost (`Clocks.floor`). For a card held far below
boost the figure is likely low: the A100's zero run reached 95 % of its boost-clock peak, near
that ceiling, and near the voltage floor the clock goes as activity^-1. Training computes on
random-like values (`operand_values: random`, the default); a benchmark fed `torch.zeros`
does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.optimize import brentq

from simulator.config.hardware import Hardware
from simulator.gpu.occupancy import chip_limits
from simulator.units import MEGA, TERA

# FP32 lanes per SM by compute capability: 32-bit floating-point add, multiply and
# multiply-add results per clock per SM (NVIDIA CUDA C++ Programming Guide, "Arithmetic
# Instructions")
FP32_LANES_PER_SM = {"6.0": 64, "6.1": 128, "7.0": 64, "7.5": 64, "8.0": 64, "8.6": 128,
                     "8.9": 128, "9.0": 128}
# Time constant of GPU Boost's response to load, seconds (see the module docstring).
POWER_RESPONSE_S = 0.75e-3
# The sustained clock on zero operands against random ones (see the module docstring).
ZERO_OPERAND_CLOCK_GAIN = 295 / 257


@dataclass(frozen=True)
class Clocks:
    boost_mhz: float | None
    sustained_mhz: float | None

    @property
    def stated(self) -> bool:
        return self.boost_mhz is not None and self.sustained_mhz is not None

    @property
    def scale(self) -> float:
        """The share of the datasheet peak the SMs run at under load (1 when not stated)."""
        return self.sustained_mhz / self.boost_mhz if self.stated else 1.0

    def floor(self, operand_values: str = "random") -> float:
        """The share of boost the SMs sink to under load on these operand values (zeros: the
        power limit holds the clock less far down, never above boost)."""
        if operand_values == "zeros" and self.scale < 1.0:
            return min(1.0, self.scale * ZERO_OPERAND_CLOCK_GAIN)
        return self.scale

    def held_mhz(self, operand_values: str = "random") -> float | None:
        """The SM clock under load on these operand values (None when not stated)."""
        return self.boost_mhz * self.floor(operand_values) if self.stated else None


def clocks(hw: Hardware) -> Clocks:
    return Clocks(hw.boost_clock_mhz, hw.sustained_clock_mhz)


def rated_boost_mhz(hw: Hardware) -> float | None:
    """The boost clock the datasheet peaks are counted at: the file's, else its FP32 peak over
    the FP32 lanes of its SMs (an NVIDIA chip of known compute capability); None otherwise."""
    if hw.boost_clock_mhz:
        return hw.boost_clock_mhz
    limits = chip_limits(hw.chip) if hw.vendor == "NVIDIA" and hw.chip else None
    fp32 = hw.peak_tflops.get("fp32")
    if limits is None or not fp32 or not hw.sm_count or limits[0] not in FP32_LANES_PER_SM:
        return None
    return fp32 * TERA / (2 * FP32_LANES_PER_SM[limits[0]] * hw.sm_count) / MEGA


class ClockState:
    """The GPU's clock as its recent load leaves it."""

    def __init__(self, clk: Clocks, heat: float = 1.0, response_s: float = POWER_RESPONSE_S,
                 operand_values: str = "random"):
        self.floor = clk.floor(operand_values)  # clock as a share of boost once fully hot
        self.heat = heat
        self.response_s = response_s

    @property
    def scale(self) -> float:
        """The clock now, as a share of boost."""
        return 1.0 - (1.0 - self.floor) * self.heat

    def _work(self, t: float) -> float:
        """Boost-clock seconds of work done in t busy seconds from the current heat."""
        tau = self.response_s
        return self.floor * t + (1.0 - self.floor) * (1.0 - self.heat) * tau * \
            (1.0 - math.exp(-t / tau))

    def stretch(self, boost_s: float) -> float:
        """Seconds that `boost_s` of work at the boost clock takes from the current heat, the
        clock sinking as it runs."""
        if boost_s <= 0 or self.floor == 1.0:
            return boost_s
        ends = sorted((boost_s, boost_s / self.floor))  # the clock stays between the two
        return brentq(lambda t: self._work(t) - boost_s, *ends)

    def busy(self, s: float) -> None:
        self.heat = 1.0 - (1.0 - self.heat) * math.exp(-s / self.response_s)

    def idle(self, s: float) -> None:
        self.heat *= math.exp(-s / self.response_s)
