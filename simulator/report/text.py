"""Plain-text reports for the terminal. Every figure says its unit."""

from __future__ import annotations

from simulator.config.hardware import Hardware, peak_unit
from simulator.estimate import OpTime, StepEstimate
from simulator.gpu.clocks import rated_boost_mhz
from simulator.gpu.compute import launch_overhead_s
from simulator.gpu.l2 import ESTIMATED_L2_TO_DRAM_BANDWIDTH
from simulator.gpu.model import compute_settings
from simulator.pipeline import RunResult
from simulator.replay import separation
from simulator.replay.traffic import check_burst_share
from simulator.units import GB, GiB, fmt_bytes, fmt_flops, fmt_seconds, fmt_share


def table(rows: list[list[str]], align: str) -> list[str]:
    """Columns padded to their widest cell; `align` holds '<' or '>' per column."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [c.ljust(w) if a == "<" else c.rjust(w)
                 for c, w, a in zip(r, widths, align, strict=True)]
        out.append("  " + "  ".join(cells).rstrip())
    return out


_pct = fmt_share


def hardware_line(hw: Hardware) -> str:
    m = hw.memory
    return (f"{hw.display_name} ({hw.name}): {m.type} {m.bus_width_bits}-bit @ "
            f"{m.data_rate_gbps:g} Gb/s per pin = {m.peak_bandwidth_GBps:.1f} GB/s peak, "
            f"{m.capacity_bytes / GiB:.0f} GiB")


def compute_lines(hw: Hardware, eager: bool = True, host_waits: int = 0,
                  operand_values: str = "random") -> list[str]:
    """What the replay ran the SMs and the host at (gpu/model.py): absent from analytic."""
    c = compute_settings(hw, eager, host_waits, operand_values)
    clk, fam = c["clocks"], c["library"]["families"]
    if clk["stated"]:
        held = clk["held_MHz"]
        load = (f"{clk['sustained_MHz']:g} MHz under sustained load" if operand_values == "random"
                else f"{held:.0f} MHz under sustained load on zero operands "
                     f"({clk['sustained_MHz']:g} MHz on random ones)")
        clock = (f"SM clock {load} of {clk['boost_MHz']:g} MHz boost (peaks x "
                 f"{held / clk['boost_MHz']:.2f}; GPU Boost response "
                 f"{clk['power_response_ms']:.2g} ms)")
    else:
        boost = rated_boost_mhz(hw)
        clock = ("SM clock: the rated boost"
                 + (f", {boost:.0f} MHz by the FP32 peak" if boost else "")
                 + " (the hardware file states no sustained clock; a board's own: sweep "
                 "--vary sustained_clock_mhz=...)")
    host = c["host_dispatch_us_by_op_kind"]
    tf32 = c["library"]["family_by_peak"].get("tf32_tensor")
    return [f"Compute   {clock}",
            "  library kernels: main loop at " + ", ".join(
                f"{f['mainloop'] * 100:.0f} % ({n})" for n, f in fam.items()) +
            " of the clock's peak, less tile, wave and per-tile losses "
            f"({c['library']['coefficients_file']})" +
            (f"; TF32 runs the {tf32} family on this chip" if tf32 else ""),
            (f"  host: eager PyTorch dispatch {min(host.values()):g}-{max(host.values()):g} us "
             "per op by kind" if host else "  host: none per op (a captured CUDA graph or a "
             "native program launches the kernels)") +
            f"; launch gap {c['kernel_launch_gap_us']:g} us" +
            (f"; the host waits for the GPU at {host_waits:,} results it reads (.item())"
             if host_waits else "")]


def hardware_details(hw: Hardware) -> str:
    m = hw.memory
    lines = [hardware_line(hw), ""]
    rows = [["memory", f"{m.type}, {m.devices} devices of {m.device_density_gbit:g} Gb"
             f"{' in x8 clamshell' if m.clamshell else ''}, {m.channels} channels x "
             f"{m.channel_width_bits} bit"]]
    rows.append(["capacity", f"{m.capacity_bytes:,} B = {m.capacity_bytes / GiB:.2f} GiB"])
    rows.append(["runtime reserve", reserve_line(hw).removeprefix("runtime reserve ")])
    rows.append(["peak bandwidth", f"{m.peak_bandwidth_GBps:.1f} GB/s (1e9 B/s) = "
                 f"{m.bus_width_bits} bit x {m.data_rate_gbps:g} Gb/s / 8"])
    if m.ck_GHz:
        rows.append(["clocks", f"CK {m.ck_GHz * 1e3:.1f} MHz (data rate / 8), WCK "
                     f"{m.wck_GHz * 1e3:.1f} MHz ({m.wck_mode}: data rate / "
                     f"{4 if m.wck_mode == 'QDR' else 2})"])
    cache = f"L2 {fmt_bytes(hw.l2_bytes)}" if hw.l2_bytes else "none stated"
    if hw.last_level_cache_bytes:
        cache += f" + {fmt_bytes(hw.last_level_cache_bytes)} last-level (Infinity Cache)"
    if hw.l2_bandwidth_GBps:
        cache += f"; L2 bandwidth {hw.l2_bandwidth_GBps:g} GB/s (measured)"
    rows.append(["caches", cache])
    if hw.tdp_w:
        rows.append(["TDP", f"{hw.tdp_w:g} W"])
    rows.append(["price", f"${hw.price_usd:,.0f}" if hw.price_usd else "not known"])
    lines += table(rows, "<<")
    lines += ["", "  compute ceilings and ridge points (FLOP per DRAM byte where the compute "
              "ceiling meets peak bandwidth):"]
    ridge = hw.ridge_points()
    rows = [["unit", "peak", "ridge"]]
    for key, value in hw.peak_tflops.items():
        unit, per = peak_unit(key)
        rows.append([key, f"{value:g} {unit}" if value else "none",
                     f"{ridge[key]:.1f} {per}" if value else "-"])
    lines += ["  " + s for s in table(rows, "<>>")]
    if m.timing:
        t = m.timing.as_dict()
        lines += ["", f"  GDDR6 timing at {m.data_rate_gbps:g} Gb/s, in CK cycles "
                  f"(tCK = {1 / m.ck_GHz:.3f} ns):"]
        lines += _settings_lines(t, 8) + [f"    source: {m.timing_source}"]
        ctl = hw.controller
        lines += ["", "  address mapping, least significant first above the 32 B access:",
                  f"    {ctl.mapping.describe()}", f"    source: {ctl.mapping.cited}"]
        lines += ["", "  memory controller, per channel (buffers in requests of 32 B):"]
        shown = ctl.settings()
        if ctl.refresh != "per_bank":  # (it bounds owed per-bank refreshes only)
            shown.pop("refresh_postpone")
        lines += _settings_lines(shown, 5)
        lines.append(f"    source: {hw.controller_source}")
    lines += ["", "  sources:"] + [f"    - {s}" for s in hw.sources]
    return "\n".join(lines)


def _settings_lines(settings: dict, per_line: int) -> list[str]:
    """`name=value` pairs, `per_line` to an indented line."""
    items = [f"{k}={v}" for k, v in settings.items()]
    return ["    " + "  ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]


def _recipe(spec) -> str:
    """What the step does around the update beyond the optimizer: clipping, master weights."""
    parts = []
    if spec.master_weights:
        parts.append("fp32 master weights")
    if spec.grad_clip is not None:
        parts.append(f"gradients clipped to norm {spec.grad_clip.max_norm:g} "
                     f"({spec.grad_clip.implementation})")
    if spec.execution.zero_grad == "zeros":
        parts.append("gradients kept between steps and zeroed (zero_grad set_to_none=False)")
    return "; " + ", ".join(parts) if parts else ""


def run_report(r: RunResult, top: int = 10) -> str:
    est, trace, spec, hw = r.estimate, r.trace, r.workload, r.hardware
    shape = f"batch {spec.batch_size}" if spec.batch_size else "batch as captured"
    if spec.src_seq_len:
        shape += f", sequence {spec.src_seq_len} (source) / {spec.tgt_seq_len} (target)"
    if spec.seq_len:
        shape += f" x sequence {spec.seq_len}"
    opt = spec.optimizer
    lines = [
        f"Workload  {spec.name}  ({spec.path})",
        f"  {spec.model['type']}: {trace.parameter_count:,} parameters in "
        f"{len(trace.parameters)} tensors ({fmt_bytes(trace.parameter_bytes)} {spec.dtype})",
        f"  {shape}; {spec.dtype}; loss {spec.loss}; optimizer {opt.type} ({opt.implementation}),"
        f" state {fmt_bytes(trace.optimizer_state_bytes)}" + _recipe(spec),
        f"Hardware  {hardware_line(hw)}",
    ]
    if spec.model["type"] == "stream":  # a memory benchmark: no model, nothing trained
        lines[1:3] = [f"  memory benchmark: {', '.join(spec.model['kernels'])} over three arrays "
                      f"of {spec.model['array_elements']:,} {spec.dtype}"]
    if est.analytic is not est:  # replayed: say what the compute side ran at
        lines += compute_lines(hw, trace.eager, trace.host_wait_count, trace.operand_values)
    if trace.causal_attention_flops:
        lines.insert(3, f"  causal attention: {fmt_flops(trace.causal_attention_flops)} counted "
                        "in full (FlopCounterMode); a kernel skipping masked blocks does half")
    lines += [
        "",
        *memory_lines(r),
        "",
        f"Phases (time: {fidelity_line(est)}; ops run back to back)",
    ]
    simulated = est.analytic is not est
    lines += table(phase_rows(est), "<>>>>>>>" + (">" if simulated else "") + "<")
    if top > 0:  # (--top 0: no op table, not an empty one)
        lines += ["", f"Top {min(top, len(est.ops))} ops by time (DRAM bytes after the L2; "
                  "GB/s: DRAM bytes over the op's time)"]
        lines += table(op_rows(est, top), "<<<>>>>" + (">" if simulated else "") + "><<")
    if est.replay is not None:
        lines += ["", *bottleneck_lines(est)]
    if r.feed is not None:
        from simulator.report.feed_report import feed_lines

        lines += ["", *feed_lines(r.feed)]
    lines += ["", step_line(est)]
    if est.replay is not None:
        lines.append(separation_line(est))
    return "\n".join(lines)


def fit_verdict(fits: bool, reserve_fits: bool | None) -> str:
    """yes: the caching allocator's reserve fits (what an out-of-memory error checks); live
    only: the live peak alone does; no. Without a reserve (sharding scales the live timeline;
    sweep points kept from before it was recorded), by the live peak."""
    if reserve_fits is None:
        return "yes" if fits else "no"
    return "yes" if reserve_fits else ("live only" if fits else "no")


def reserve_line(hw: Hardware) -> str:
    res = hw.runtime_reserve
    ecc = hw.memory.ecc_reserved_bytes
    return (f"runtime reserve {fmt_bytes(res.total_bytes)} (context "
            f"{fmt_bytes(res.context_bytes)}, library workspaces "
            f"{fmt_bytes(res.workspace_bytes)})"
            + (f", inline ECC {fmt_bytes(ecc)}" if ecc else "") +
            f": {fmt_bytes(hw.usable_bytes)} usable of {fmt_bytes(hw.memory.capacity_bytes)}")


def memory_lines(r: RunResult) -> list[str]:
    """The memory section (heading first), as the text and HTML reports show it."""
    mem, cap = r.memory, r.hardware.usable_bytes
    return [
        "Memory (live tensor bytes at op boundaries, then the caching allocator's reserve; "
        "each held to the capacity less the runtime's reserve)",
        f"  {reserve_line(r.hardware)}",
        f"  peak {fmt_bytes(mem.peak_bytes)} ({mem.peak_bytes:,} B) of {fmt_bytes(cap)} "
        "usable: "
        + (f"fits, {_pct(mem.peak_bytes / cap)} of it" if r.fits else
           f"DOES NOT FIT, {fmt_bytes(mem.peak_bytes - cap)} over"),
        f"  at {mem.peak_phase.value} op '{r.trace.ops[mem.peak_op].name}'; by category: "
        + ", ".join(f"{c.value} {fmt_bytes(v)}" for c, v in mem.at_peak.items() if v),
        *([] if r.placement is None else [
            f"  caching allocator: {fmt_bytes(r.placement.reserved_peak)} reserved, "
            + ("fits" if r.reserve_fits else "DOES NOT FIT")
            + " (what an out-of-memory error checks)"]),
        *([] if r.fits and r.reserve_fits is not False else [
            f"  what would make it fit: python -m simulator memory {r.workload.path} "
            f"--hardware {r.hardware.name}"]),
    ]


def phase_rows(est: StepEstimate) -> list[list[str]]:
    """The phase table (header first, the step last), as the text and HTML reports show it;
    a replay has the analytic time beside its own."""
    analytic = est.analytic
    simulated = analytic is not est
    ana_phase = {p.phase: p.time_s for p in analytic.phases()}
    rows = [["phase", "ops", "FLOPs", "read", "written", "FLOP/B", "time",
             *(["analytic"] if simulated else []), "share", "bound"]]
    step = est.step_time_s
    for p in est.phases():
        rows.append([p.phase.value, str(p.ops), fmt_flops(p.flops), fmt_bytes(p.bytes_read),
                     fmt_bytes(p.bytes_written), f"{p.arithmetic_intensity:.1f}",
                     fmt_seconds(p.time_s),
                     *([fmt_seconds(ana_phase[p.phase])] if simulated else []),
                     _pct(p.time_s / step if step else 0),
                     _bound_cell(p.bound, p.time_by_class, p.time_s)])
    total_flops = sum(p.flops for p in est.phases())
    rows.append(["step", str(len(est.ops)), fmt_flops(total_flops),
                 fmt_bytes(sum(p.bytes_read for p in est.phases())),
                 fmt_bytes(sum(p.bytes_written for p in est.phases())), "", fmt_seconds(step),
                 *([fmt_seconds(analytic.step_time_s)] if simulated else []), "100.0 %",
                 _bound_cell(est.bound, est.time_by_class, step)])
    return rows


def _bound_cell(bound: str | None, time_by_class: dict[str, float], time_s: float) -> str:
    """'memory (56.4 % of time memory-bound)': the bound class and the share it holds."""
    if bound is None:
        return "-"
    held = time_by_class[bound]
    return f"{bound} ({_pct(held / time_s if time_s else 0)} of time {bound}-bound)"


def op_rows(est: StepEstimate, top: int) -> list[list[str]]:
    """The `top` slowest ops (header first), as the text and HTML reports show them."""
    simulated = est.analytic is not est
    ana_op = {o.op.index: o.time_s for o in est.analytic.ops}
    rows = [["op", "phase", "kind", "FLOPs", "DRAM bytes", "FLOP/B", "time",
             *(["analytic"] if simulated else []), "GB/s", "bound", "ceiling"]]
    for o in est.slowest(top):
        rows.append([o.op.name, o.op.phase.value, o.op.kind, fmt_flops(o.op.flops),
                     fmt_bytes(o.bytes_to_dram), f"{o.op.arithmetic_intensity:.1f}",
                     fmt_seconds(o.time_s),
                     *([fmt_seconds(ana_op[o.op.index])] if simulated else []),
                     f"{achieved_GBps(o):.1f}", o.bound,
                     o.ceiling if o.bound == "compute" else "-"])
    return rows


def achieved_GBps(o: OpTime) -> float:
    """DRAM bytes (after the L2) over the op's time, GB/s."""
    return o.bytes_to_dram / o.time_s / GB if o.time_s else 0.0


def fidelity_line(est: StepEstimate) -> str:
    if est.replay is None:
        return "analytic roofline, peak compute per data type and peak DRAM bandwidth"
    return (f"{est.fidelity} replay through the GDDR6 engine, L2 and compute model; "
            "analytic = peak roofline beside it")


def step_line(est: StepEstimate) -> str:
    return f"Step time  {fmt_seconds(est.step_time_s)}  {step_detail(est)}"


SEPARATION_NAMES = {"kernel_efficiency": "library kernels (tiles, waves, main loop)",
                    "clocks": "clock under load", "dram_and_l2": "simulated DRAM and L2",
                    "host_and_launch": "host dispatch and launch"}


def separation_line(est: StepEstimate) -> str:
    """What separates the replayed step from the analytic roofline, effect by effect."""
    steps = list(separation(est).items())
    parts = [f"{SEPARATION_NAMES[name]} {_signed_pct((t - prev) / steps[0][1])}"
             for (_, prev), (name, t) in zip(steps, steps[1:], strict=False)]
    return "  from the analytic roofline, as each effect joins: " + ", ".join(parts)


def step_detail(est: StepEstimate) -> str:
    """What qualifies the step time: '(sampled, error bound ...; analytic ..., +4.6 %; 56.4 %
    of it in memory-bound ops)'."""
    step = est.step_time_s
    mem_share = _pct(est.memory_bound_time_s / step if step else 0)
    if est.replay is None:
        return f"(analytic; {mem_share} of it in memory-bound ops)"
    a = est.analytic.step_time_s
    err = est.replay.error_bound_s
    return (f"({est.fidelity}"
            + (f", error bound +-{fmt_seconds(err)}" if est.fidelity == "sampled" else "")
            + f"; analytic {fmt_seconds(a)}, {_signed_pct(step / a - 1 if a else 0)}; "
            f"{mem_share} of it in memory-bound ops)")


def _signed_pct(x: float) -> str:
    return f"{x * 100:+.1f} %"


LAUNCH_SHARE_SHOWN = 0.01  # launch gaps under this share of the step go unmentioned

CHANGE_NAMES = {"dram_bandwidth_+25%": "DRAM bandwidth +25 % (data rate or bus width)",
                "compute_+25%": "compute +25 % (SM clock or count)",
                "l2_bandwidth_+25%": "L2 bandwidth +25 %",
                "l2_capacity_x2": "L2 capacity x2"}


def shared_results(est: StepEstimate) -> tuple[int, int, float]:
    """(ops, of DRAM-bound ops, share of their DRAM time) whose DRAM result an earlier op of
    the same traffic shape measured at its own addresses (`sampled`)."""
    d = est.replay
    bound = [r for o, r in zip(est.ops, d.per_op, strict=True) if o.bound.startswith("dram")]
    shared = [r for r in bound if r.service.simulated_requests == 0]
    total = sum(r.service.span_ck for r in bound)
    return len(shared), len(bound), sum(r.service.span_ck for r in shared) / total if total else 0.0


def bottleneck_lines(est: StepEstimate) -> list[str]:
    d = est.replay
    b = d.bottlenecks
    step = est.step_time_s
    lines = ["Bottlenecks",
             f"  memory-bound share of step time: {_pct(b.memory_bound_share)}; time by bound: "
             + ", ".join(f"{k} {fmt_seconds(v)}" for k, v in b.time_by_bound.items())]
    launch = b.time_by_bound.get("launch", 0.0)
    if launch >= LAUNCH_SHARE_SHOWN * step:
        lines.append(f"  launch-bound share of step time: {_pct(launch / step)}: the GPU "
                     "waited on the host's per-op dispatch (eager PyTorch) and the "
                     f"{fmt_seconds(launch_overhead_s(est.hardware))} launch gap; no change "
                     "below shortens it, fusing kernels or CUDA graphs would")
    if b.dram_lost_by_cause:
        lost = sorted(b.dram_lost_by_cause.items(), key=lambda kv: -kv[1])
        check = check_burst_share(est.hardware)
        ecc = (f" ({_pct(b.dram_busy_share * check)} carrying inline ECC's check bits, a 32 B "
               "burst with every 128 B line)" if check else "")
        lines.append(f"  DRAM in DRAM-bound ops: data bus busy {_pct(b.dram_busy_share)} of "
                     f"channel-cycles{ecc}; lost to " + ", ".join(
                         f"{k.replace('_', ' ')} {_pct(v)}" for k, v in lost))
    best = b.what_if[b.best_change]
    lines.append(f"  single change that helps most: {CHANGE_NAMES[b.best_change]}: step "
                 f"{fmt_seconds(best)} ({_signed_pct(best / step - 1 if step else 0)}); others: "
                 + ", ".join(f"{CHANGE_NAMES[k]} {_signed_pct(v / step - 1 if step else 0)}"
                             for k, v in b.what_if.items() if k != b.best_change))
    s = d.dram
    lat = s.read_latency_cycles
    lines.append(f"  DRAM engine ({d.simulated_requests:,} requests simulated): "
                 f"{s.reads:,} reads, {s.writes:,} writes, row hit rate {_pct(s.row_hit_rate)}, "
                 f"{s.refreshes:,} refreshes, read latency mean {lat['mean'] * s.tck_ns:.1f} ns "
                 f"({lat['mean']:.1f} CK)")
    if est.fidelity == "sampled":
        shared, bound, share = shared_results(est)
        lines.append(f"  sampled: {shared} of {bound} DRAM-bound ops "
                     f"({_pct(share)} of their DRAM time) took the result of an earlier op "
                     "of the same traffic shape, measured at its addresses: their own can meet "
                     "other bank conflicts (dram_simulated_requests 0 in --json)")
    lines.append(f"  L2 ceiling {d.l2_bandwidth_GBps:.0f} GB/s ("
                 + ("measured" if d.l2_bandwidth_measured else
                    f"estimated at {ESTIMATED_L2_TO_DRAM_BANDWIDTH:g} x DRAM peak; set "
                    "cache.l2_bandwidth_GBps in the hardware file")
                 + f"); cache for reuse {fmt_bytes(d.cache_bytes)}")
    if not d.fits:
        lines.append("  the allocator's reserved peak exceeds capacity: addresses wrap round "
                     "the device, so the DRAM figures are indicative only")
    return lines
