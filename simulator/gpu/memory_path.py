"""The GPU's side of its memory controllers, for hardware files that do not state their own.

A GPU keeps far more requests in flight than a CPU-style controller: the L2 slices queue misses
and hold dirty lines until they are written back in long batches. Modelled as deep per-channel
read and write queues (Little's law: 256 x 32 B per channel in flight covers about 500 ns of
latency at full rate), writes drained in batches of about 230 (from 95 % to 50 % of a
512-entry queue), with per-bank refresh as GDDR6 GPUs use (postponed while its bank is busy,
up to the controller's `refresh_postpone`, then given the bank). FR-FCFS keeps a bank's row open
while requests for it are queued (the hit guard: GPU schedulers serve a row's requests before
closing it, as GPGPU-Sim's FR-FCFS does). Ramulator 2's FR-FCFS takes the oldest ready
command, so it precharges a row for an older request whenever that precharge is ready before
the row's next read: with nRTP equal to nCCDL (the 14 Gb/s datasheet set) in the very cycle
the read could issue, with nRTP below it (10 Gb/s) a cycle before. All along two streams that
cost the 24 GB cards 9 % of their peak, and the T4 2 %. Each channel's queues fill from its
own requests (per-channel front ends): the crossbar feeds every memory partition from its own
L2 slices, so a full queue holds back that partition's misses, not the whole GPU's. One
setting for every card; the card-specific part is its organisation, timing and address
mapping (the file's `memory.address_mapping` where its maker documents one).
benchmarks/stream_fidelity.py compares the result with sustained bandwidth measured on three
cards.
"""

from __future__ import annotations

import dataclasses

from simulator.config.hardware import Hardware
from simulator.dram.controller import ControllerConfig

GPU_CONTROLLER = ControllerConfig(
    read_buffer=256, write_buffer=512, active_buffer=32,
    write_high_watermark=0.95, write_low_watermark=0.5,
    scheduler="frfcfs_hit_guard", page_policy="open", refresh="per_bank", frontend="per_channel")


def controller(hw: Hardware) -> ControllerConfig:
    """The file's own `memory.controller` when it states one, else the GPU memory path; with
    the file's address mapping either way."""
    if hw.controller_stated:
        return hw.controller
    return dataclasses.replace(GPU_CONTROLLER, mapping=hw.controller.mapping)


def controller_source(hw: Hardware) -> str:
    """Where the card's controller settings come from, for reports."""
    if hw.controller_stated:
        return "the hardware file's memory.controller"
    return "the GPU memory path (simulator/gpu/memory_path.py): the hardware file states none"
