"""The `run --json` document. Key names carry units; see README 'Output: JSON'."""

from __future__ import annotations

import math
from typing import Any

from simulator.config.hardware import Hardware, peak_unit
from simulator.estimate import BOUNDS, StepEstimate
from simulator.gpu.model import compute_settings
from simulator.pipeline import RunResult
from simulator.replay import separation
from simulator.replay.traffic import check_burst_share
from simulator.report.feed_report import feed_doc
from simulator.report.text import achieved_GBps, shared_results
from simulator.workload.trace import PHASES

FORMAT = "gddr6-roofline-sim/run"
FORMAT_VERSION = 1


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def hardware_doc(hw: Hardware) -> dict[str, Any]:
    m = hw.memory
    doc: dict[str, Any] = {
        "name": hw.name, "display_name": hw.display_name, "vendor": hw.vendor, "chip": hw.chip,
        "memory_type": m.type, "data_rate_gbps": m.data_rate_gbps,
        "bus_width_bits": m.bus_width_bits, "channels": m.channels,
        "channel_width_bits": m.channel_width_bits, "devices": m.devices,
        "clamshell": m.clamshell, "device_density_gbit": m.device_density_gbit,
        "capacity_bytes": m.capacity_bytes, "runtime_reserve": reserve_doc(hw),
        "peak_bandwidth_GBps": m.peak_bandwidth_GBps,
        "ck_MHz": m.ck_GHz * 1e3 if m.ck_GHz else None,
        "wck_MHz": m.wck_GHz * 1e3 if m.wck_GHz else None, "wck_mode": m.wck_mode,
        "l2_bytes": hw.l2_bytes, "last_level_cache_bytes": hw.last_level_cache_bytes,
        "l2_bandwidth_GBps": hw.l2_bandwidth_GBps,
        "kernel_launch_overhead_us": hw.kernel_launch_overhead_us,
        "peak_tflops": hw.peak_tflops,  # 1e12 FLOP/s; int8 in 1e12 OP/s (peak_units)
        "peak_units": {k: peak_unit(k)[0] for k in hw.peak_tflops},
        "ridge_point_flop_per_byte": hw.ridge_points(),
        "tdp_w": hw.tdp_w, "price_usd": hw.price_usd, "path": hw.path,
    }
    if m.timing is not None:
        doc["timing_ck"] = m.timing.as_dict()
        doc["timing_source"] = m.timing_source
        ctl = hw.controller
        doc["address_mapping"] = {
            "fields": list(ctl.mapping.fields),
            "hash": [{"target": t, "source": s} for t, s in ctl.mapping.hash],
            "source": ctl.mapping.cited}
        doc["controller"] = {**ctl.settings(), "source": hw.controller_source}
    return doc


def run_doc(r: RunResult) -> dict[str, Any]:
    est, trace, mem, spec = r.estimate, r.trace, r.memory, r.workload
    analytic = est.analytic
    phases = {p.phase.value: p for p in est.phases()}
    cap = r.hardware.memory.capacity_bytes
    peak_op = trace.ops[mem.peak_op]
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fidelity": est.memory_model,
        "hardware": hardware_doc(r.hardware),
        # what the replay ran the SMs and the host at; null for the analytic roofline
        "compute_model": (compute_settings(r.hardware, est.trace.eager,
                                           est.trace.host_wait_count, est.trace.operand_values)
                          if est.analytic is not est else None),
        "workload": {
            "name": spec.name, "path": spec.path, "model_type": spec.model["type"],
            "dtype": spec.dtype, "batch_size": spec.batch_size, "seq_len": spec.seq_len,
            "src_seq_len": spec.src_seq_len, "tgt_seq_len": spec.tgt_seq_len,
            "optimizer": {"type": spec.optimizer.type,
                          "implementation": spec.optimizer.implementation,
                          "weight_decay_on": spec.optimizer.weight_decay_on},
            "grad_clip": (None if spec.grad_clip is None else
                          {"max_norm": spec.grad_clip.max_norm,
                           "implementation": spec.grad_clip.implementation}),
            "master_weights": spec.master_weights,
            "zero_grad": spec.execution.zero_grad,
            "parameters": trace.parameter_count,
            "parameter_tensors": len(trace.parameters),
            "parameter_bytes": trace.parameter_bytes,
            "optimizer_state_bytes": trace.optimizer_state_bytes,
            "ops": len(trace.ops),
            "flops": {**{p.value: phases[p.value].flops for p in PHASES},
                      "total": sum(ph.flops for ph in phases.values())},
            "flops_convention": "FlopCounterMode: 2 per multiply-add; matmul, convolution and "
                                "attention only; causal attention counted in full",
            "causal_attention_flops": trace.causal_attention_flops,
            "bytes_read": {p.value: phases[p.value].bytes_read for p in PHASES},
            "bytes_written": {p.value: phases[p.value].bytes_written for p in PHASES},
        },
        "memory": {
            "peak_bytes": mem.peak_bytes,
            "capacity_bytes": cap,
            "runtime_reserve": reserve_doc(r.hardware),
            "usable_bytes": r.hardware.usable_bytes,
            "fits": r.fits,
            "headroom_bytes": r.hardware.usable_bytes - mem.peak_bytes,
            "peak_phase": mem.peak_phase.value,
            "peak_op": peak_op.name,
            "by_category_at_peak": {c.value: v for c, v in mem.at_peak.items()},
            "definition": "live tensor storage bytes at op boundaries; no allocator rounding, "
                          "caching, runtime context or library workspaces (the runtime "
                          "reserve, taken from the capacity: fits and headroom are held to "
                          "usable_bytes)",
            **({} if r.placement is None else {
                "reserved_bytes": r.placement.reserved_peak, "reserve_fits": r.reserve_fits}),
        },
        "phases": {
            name: {"ops": p.ops, "flops": p.flops, "bytes_read": p.bytes_read,
                   "bytes_written": p.bytes_written, "time_s": p.time_s,
                   "arithmetic_intensity": p.arithmetic_intensity, "bound": p.bound,
                   "memory_bound_time_share": (p.memory_bound_time_s / p.time_s
                                               if p.time_s else 0.0),
                   "launch_bound_time_share": (p.launch_bound_time_s / p.time_s
                                               if p.time_s else 0.0)}
            for name, p in phases.items()
        },
        "step_time_s": est.step_time_s,
        "step_bound": est.bound,
        "analytic_step_time_s": analytic.step_time_s,
        "step_time_error_bound_s": est.replay.error_bound_s if est.replay else 0.0,
        "bounds": list(BOUNDS),
        "ops": [
            {"name": o.op.name, "phase": o.op.phase.value, "kind": o.op.kind,
             "dtype": o.op.dtype, "unit": o.op.unit.value, "ceiling": o.ceiling,
             "flops": o.op.flops, "bytes_read": o.op.bytes_read,
             "bytes_written": o.op.bytes_written, "dram_bytes": o.bytes_to_dram,
             "time_s": o.time_s, "analytic_time_s": a.time_s,
             "compute_time_s": o.compute_s, "memory_time_s": o.memory_s,
             "l2_time_s": o.l2_s, "launch_time_s": o.launch_s, "bound": o.bound,
             "achieved_bandwidth_GBps": achieved_GBps(o),
             "achieved_flops_per_s": o.op.flops / o.time_s if o.time_s else 0.0,
             "arithmetic_intensity": _finite(o.op.arithmetic_intensity),
             "live_bytes": int(mem.during[i].sum()),
             **_op_dram(est, i)}
            for i, (o, a) in enumerate(zip(est.ops, analytic.ops, strict=True))
        ],
        **({"replay": replay_doc(est)} if est.replay is not None else {}),
        **({"input_pipeline": feed_doc(r.feed)} if r.feed is not None else {}),
    }


def _op_dram(est: StepEstimate, i: int) -> dict[str, Any]:
    """Replayed fidelities: how op i's DRAM time was found. `dram_simulated_requests` 0 means
    it took the result of an earlier op of the same traffic shape (sampled), measured at that
    op's addresses, not its own."""
    if est.replay is None:
        return {}
    s = est.replay.per_op[i].service
    return {"memory_time_error_bound_s": s.error_ck * est.replay.dram.tck_ns * 1e-9,
            "dram_simulated_requests": s.simulated_requests}


_ENGINE_COUNTS = ("requests", "reads", "writes", "bytes", "read_latency_ns", "read_latency_cycles",
                  "row_hit_rate", "row_hits", "row_misses", "row_conflicts",
                  "reads_forwarded_from_write_buffer", "refreshes", "commands", "energy_pJ",
                  "energy_model", "clock", "tck_ns")


def replay_doc(est: StepEstimate) -> dict[str, Any]:
    d = est.replay
    b = d.bottlenecks
    return {
        "simulated_requests": d.simulated_requests,
        # step seconds as each effect joins the analytic roofline (replay.SEPARATION)
        "step_time_s_as_effects_join": separation(est),
        "l2_bandwidth_GBps": d.l2_bandwidth_GBps,
        "l2_bandwidth_measured": d.l2_bandwidth_measured,
        "cache_bytes_for_reuse": d.cache_bytes,
        "addresses_fit": d.fits,
        **({"dram_bound_ops_on_shared_results": dict(zip(
            ("ops", "of_dram_bound_ops", "dram_time_share"), shared_results(est),
            strict=True))} if est.fidelity == "sampled" else {}),
        "bottlenecks": {
            "memory_bound_time_share": b.memory_bound_share,
            "time_s_by_bound": b.time_by_bound,
            "dram_busy_share_in_dram_bound_ops": b.dram_busy_share,
            "dram_check_bit_share_of_bursts": check_burst_share(est.hardware),
            "dram_lost_share_by_cause": b.dram_lost_by_cause,
            "step_time_s_if": b.what_if,
            "best_single_change": b.best_change,
        },
        # counts over the requests the engine simulated (sampled: the windows only); time and
        # bandwidth are per op, above
        "dram_engine": {k: v for k, v in d.dram.as_dict().items() if k in _ENGINE_COUNTS},
    }


def reserve_doc(hw: Hardware) -> dict[str, Any]:
    """The runtime's reserve and what it leaves, as every JSON document states it."""
    res = hw.runtime_reserve
    return {"context_bytes": res.context_bytes, "workspace_bytes": res.workspace_bytes,
            "total_bytes": res.total_bytes, "source": res.source,
            "ecc": hw.memory.ecc, "ecc_reserved_bytes": hw.memory.ecc_reserved_bytes,
            "usable_bytes": hw.usable_bytes}
