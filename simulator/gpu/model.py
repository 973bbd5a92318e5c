"""What the replay's compute side runs a card at: one record, for the reports to show."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from simulator.config.hardware import Hardware
from simulator.gpu.clocks import POWER_RESPONSE_S, clocks
from simulator.gpu.compute import launch_overhead_s
from simulator.gpu.dispatch import DISPATCH_US
from simulator.gpu.library import COEFFICIENTS, conv_costs, families, family_of


def compute_settings(hw: Hardware, eager: bool = True, host_waits: int = 0,
                     operand_values: str = "random") -> dict[str, Any]:
    """Clocks, library kernel efficiencies, per-op host cost and launch gap (units in keys).
    `eager`: the trace's ops are dispatched by eager PyTorch (else a captured graph or a
    native program launches them, at no per-op host cost: the table is empty). `host_waits`:
    the step's results the host reads, each a wait for the GPU. `operand_values`: what the
    kernels compute on (zeros: a power-capped card holds a higher clock, `held_MHz`)."""
    clk = clocks(hw)
    return {
        "clocks": {"boost_MHz": clk.boost_mhz, "sustained_MHz": clk.sustained_mhz,
                   "sustained_share_of_boost": clk.scale, "stated": clk.stated,
                   "operand_values": operand_values,
                   "held_MHz": clk.held_mhz(operand_values),
                   "power_response_ms": POWER_RESPONSE_S * 1e3},
        "library": {"families": {n: asdict(f) for n, f in families().items()},
                    "family_by_peak": {k: family_of(k, hw.chip)
                                       for k, v in hw.peak_tflops.items() if v},
                    "convolution": asdict(conv_costs()),
                    "coefficients_file": f"simulator/gpu/{COEFFICIENTS.name}"},
        "host_dispatch_us_by_op_kind": dict(DISPATCH_US) if eager else {},
        "host_waits_per_step": host_waits,
        "kernel_launch_gap_us": launch_overhead_s(hw) * 1e6,
    }
