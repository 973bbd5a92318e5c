"""The `memory` report: peak against capacity, by category and phase, and the remedies."""

from __future__ import annotations

import dataclasses
from typing import Any

from simulator.config.hardware import Hardware
from simulator.config.workload import WorkloadSpec
from simulator.report.json_report import reserve_doc
from simulator.report.text import fit_verdict, reserve_line, table
from simulator.units import fmt_bytes
from simulator.workload.allocator import Placement
from simulator.workload.memory import MemoryProfile
from simulator.workload.remedies import LargestBatch, Remedy
from simulator.workload.trace import PHASES, Trace

DEFINITION = ("live tensor storage bytes at op boundaries, each storage once; no allocator "
              "rounding or caching, runtime context or library workspaces (those are the "
              "runtime reserve, taken from the capacity)")


def memory_doc(spec: WorkloadSpec, hw: Hardware, trace: Trace, mem: MemoryProfile,
               fixes: list[Remedy], placed: Placement,
               largest: LargestBatch | None = None) -> dict[str, Any]:
    cap = hw.usable_bytes
    return {
        "format": "gddr6-roofline-sim/memory", "format_version": 1,
        "workload": spec.name, "hardware": hw.name,
        "peak_bytes": mem.peak_bytes, "capacity_bytes": hw.memory.capacity_bytes,
        "runtime_reserve": reserve_doc(hw), "usable_bytes": cap,
        "fits": mem.peak_bytes <= cap, "headroom_bytes": cap - mem.peak_bytes,
        "peak_phase": mem.peak_phase.value,
        "peak_op": trace.ops[mem.peak_op].name,
        "by_category": {c.value: v for c, v in mem.at_peak.items()},
        "peak_by_phase": {p.value: mem.peak_in(p, trace) for p in PHASES},
        "definition": DEFINITION,
        "allocator": {
            "allocated_peak_bytes": placed.allocated_peak,
            "reserved_bytes": placed.reserved_peak,
            "fragmentation": placed.fragmentation,
            "fits": placed.reserved_peak <= cap,
            "model": "PyTorch CUDA caching allocator: 512 B rounding, small (2 MiB segments) "
                     "and large pools, best fit, splitting, merging; steady state",
        },
        "remedies": [dataclasses.asdict(r) for r in fixes],
        "largest_batch_that_fits": None if largest is None else dataclasses.asdict(largest),
    }


def memory_report(spec: WorkloadSpec, hw: Hardware, trace: Trace, mem: MemoryProfile,
                  fixes: list[Remedy], placed: Placement,
                  largest: LargestBatch | None = None) -> str:
    cap = hw.usable_bytes
    fits = mem.peak_bytes <= cap
    lines = [f"{spec.name} on {hw.display_name} ({fmt_bytes(hw.memory.capacity_bytes)})",
             f"  {reserve_line(hw)}; every verdict below is held to the usable bytes",
             f"  peak {fmt_bytes(mem.peak_bytes)} ({mem.peak_bytes:,} B): "
             + (f"fits, {fmt_bytes(cap - mem.peak_bytes)} to spare" if fits else
                f"DOES NOT FIT, {fmt_bytes(mem.peak_bytes - cap)} over"),
             f"  at {mem.peak_phase.value} op '{trace.ops[mem.peak_op].name}'",
             f"  ({DEFINITION})",
             f"  caching allocator: {fmt_bytes(placed.allocated_peak)} in live blocks, "
             f"{fmt_bytes(placed.reserved_peak)} reserved ({placed.fragmentation * 100:.1f} % "
             "of it not in live blocks at the peak); "
             + ("reserved fits" if placed.reserved_peak <= cap else "reserved DOES NOT FIT"),
             "", "  at the peak, by category:"]
    rows = [[c.value, fmt_bytes(v), f"{v / mem.peak_bytes * 100:.1f} %"]
            for c, v in mem.at_peak.items() if v]
    lines += ["  " + r for r in table(rows, "<>>")]
    lines += ["", "  peak by phase:"]
    lines += ["  " + r for r in table([[p.value, fmt_bytes(mem.peak_in(p, trace))]
                                       for p in PHASES], "<>")]
    if largest is not None:
        kept = f", micro_batches {largest.micro_batches} kept" if largest.micro_batches > 1 else ""
        lines += ["", f"  largest batch that fits: batch_size {largest.batch_size} (from "
                      f"{spec.batch_size}{kept}): peak {fmt_bytes(largest.peak_bytes)}, "
                      f"{fmt_bytes(largest.reserved_bytes)} reserved by the caching allocator "
                      "(the figure held to the usable bytes)"]
    if fixes:
        lines += ["", "  remedies (each alone unless combined; per GPU; fits: the allocator's "
                      "reserve within the usable bytes, 'live only' where only the live peak "
                      "is):"]
        rows = [["remedy", "change", "peak", "reserved", "fits"]]
        rows += [[r.name, r.change, fmt_bytes(r.peak_bytes),
                  "-" if r.reserved_bytes is None else fmt_bytes(r.reserved_bytes),
                  fit_verdict(r.fits, r.reserve_fits)]
                 for r in fixes]
        lines += ["  " + r for r in table(rows, "<<>><")]
        if any(r.reserved_bytes is None for r in fixes):
            lines.append("  (sharding scales the live timeline of this step: it has no "
                         "reserve of its own, and fits by its live peak)")
    return "\n".join(lines)
