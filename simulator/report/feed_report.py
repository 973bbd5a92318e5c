"""The input pipeline in the reports: text lines, the JSON section, the timeline plot, and the
hosts' own listing."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from simulator.config.host import Host
from simulator.feed.analysis import STAGES, FeedResult
from simulator.units import GiB, fmt_bytes, fmt_seconds, fmt_share


def _rate(x: float) -> str:
    return "unbounded" if x == float("inf") else f"{x:,.0f}"


def _duration(s: float) -> str:
    return f"{s / 3600:.2f} h" if s >= 3600 else f"{s / 60:.1f} min" if s >= 60 else \
        fmt_seconds(s)


def source_line(host: Host) -> str:
    return f"{host.source_kind}; page cache {fmt_bytes(host.page_cache_bytes)}"


def feed_lines(f: FeedResult) -> list[str]:
    h, ds, ld = f.host, f.dataset, f.loader
    verdict = (f"INPUT-BOUND: the {f.bottleneck} stage bounds it" if f.bound
               else "keeps up with the GPU")
    lines = [
        f"Input pipeline  {h.display_name} ({h.name}): {source_line(h)}; "
        f"{h.cpu.cores} cores; PCIe {h.pcie.generation}.0 x{h.pcie.lanes}",
        f"  dataset {ds.name}: {ds.samples:,} samples of {fmt_bytes(ds.bytes_per_sample)} "
        f"({ds.format}, {ds.access} reads), {fmt_bytes(ds.stored_bytes)} stored; "
        f"loader: {ld.workers} workers x prefetch {ld.prefetch_factor}, "
        f"{'pinned' if ld.pin_memory else 'pageable'} memory, decode on the {ld.decode}, "
        f"copy {ld.copy.replace('_', ' ')}",
        f"  samples/s: GPU needs {_rate(f.samples_per_s_needed)}, pipeline supplies "
        f"{_rate(f.samples_per_s_supplied)} ({_rate(f.first_samples_per_s_supplied)} in the "
        f"first epoch): {verdict}",
        "  stage use with a GPU that never waits (1 = saturated): "
        + ", ".join(f"{k} {f.utilisation[k]:.2f}" for k in STAGES),
        f"  data stall per step: {fmt_seconds(f.stall_s_per_step)} in later epochs "
        f"(GPU waits {fmt_share(f.gpu_wait_share)} of the time), "
        f"{fmt_seconds(f.first_stall_s_per_step)} in the first; host-to-device copy "
        f"{fmt_seconds(f.copy_s_per_step)} per batch"
        + (" (in the step)" if ld.copy == "in_step" else " (overlapped)"),
        f"  epoch ({f.steps_per_epoch:,} steps): first (cold page cache) "
        f"{_duration(f.first_epoch_s)}, later {_duration(f.steady_epoch_s)}; the page cache "
        f"holds {fmt_share(min(f.cache_fraction, 1))} of the dataset and serves "
        f"{fmt_share(f.page_cache_hit_rate)} of later reads",
    ]
    if f.remedies:
        best = f.best_change
        lines.append(f"  single change that removes the stall: {best}" if best else
                     "  no single change tried removes the stall")
        lines += [f"    {'*' if r.removes_stall else '-'} {r.change}: stall "
                  f"{fmt_seconds(r.stall_s_per_step)}, supplies "
                  f"{_rate(r.samples_per_s_supplied)} samples/s" for r in f.remedies]
    return lines


def feed_doc(f: FeedResult) -> dict[str, Any]:
    h, ds, ld = f.host, f.dataset, f.loader
    return {
        "host": h.name, "host_path": h.path,
        "dataset": {"name": ds.name, "samples": ds.samples,
                    "bytes_per_sample": ds.bytes_per_sample, "format": ds.format,
                    "access": ds.access, "stored_bytes": ds.stored_bytes},
        "loader": {"workers": ld.workers, "prefetch_factor": ld.prefetch_factor,
                   "pin_memory": ld.pin_memory, "decode": ld.decode, "copy": ld.copy},
        "bound": f.bound,
        "bottleneck": f.bottleneck,
        "stall_s_per_step": f.stall_s_per_step,
        "first_epoch_stall_s_per_step": f.first_stall_s_per_step,
        "gpu_wait_share": f.gpu_wait_share,
        "samples_per_s_needed": f.samples_per_s_needed if f.samples_per_s_needed != float(
            "inf") else None,
        "samples_per_s_supplied": f.samples_per_s_supplied,
        "first_epoch_samples_per_s_supplied": f.first_samples_per_s_supplied,
        "gpu_step_time_s": f.gpu_step_s,
        "host_to_device_copy_s_per_step": f.copy_s_per_step,
        "stage_utilisation": f.utilisation,
        "first_epoch_s": f.first_epoch_s,
        "steady_epoch_s": f.steady_epoch_s,
        "steps_per_epoch": f.steps_per_epoch,
        "page_cache_bytes": h.page_cache_bytes,
        "page_cache_hit_rate": f.page_cache_hit_rate,
        "remedies": [{"change": r.change, "stall_s_per_step": r.stall_s_per_step,
                      "samples_per_s_supplied": r.samples_per_s_supplied,
                      "removes_stall": r.removes_stall} for r in f.remedies],
        "best_single_change": f.best_change,
    }


def host_doc(h: Host) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": h.name, "display_name": h.display_name, "description": h.description,
        "cpu": vars(h.cpu), "ram_bytes": h.ram_bytes, "reserved_bytes": h.reserved_bytes,
        "page_cache_bytes": h.page_cache_bytes,
        "pcie": {"generation": h.pcie.generation, "lanes": h.pcie.lanes,
                 "raw_GBps": h.pcie.raw_GBps, "pinned_GBps": h.pcie.copy_GBps(True),
                 "pageable_GBps": h.pcie.copy_GBps(False)},
        "sources": list(h.sources), "path": h.path}
    if h.network is not None:
        n = h.network
        doc["network"] = {**{k: v for k, v in vars(n).items() if k != "node_storage"},
                          "node_storage": vars(n.node_storage)}
    else:
        doc["storage"] = vars(h.storage)
    return doc


def host_details(h: Host) -> str:
    c, p = h.cpu, h.pcie
    lines = [f"{h.display_name} ({h.name}, {h.path})"]
    if h.description:
        lines.append(f"  {h.description}")
    lines += [f"  CPU      {c.model}: {c.cores} cores; per core {c.jpeg_megapixels_per_s:g} "
              f"megapixels/s of JPEG decode and augmentation, {c.copy_GBps:g} GB/s copy, "
              f"{c.decompress_MBps:g} MB/s decompressed",
              f"  RAM      {h.ram_bytes / GiB:g} GiB, {h.reserved_bytes / GiB:g} GiB held by the "
              f"OS and the training processes: page cache {fmt_bytes(h.page_cache_bytes)}"]
    disks = [("storage", h.storage)] if h.storage else []
    if h.network is not None:
        n = h.network
        lines.append(f"  network  {n.kind}: client link {n.client_bandwidth_Gbps:g} Gbit/s, "
                     f"{n.latency_us:g} us per request, {n.max_outstanding} in flight; "
                     f"{n.nodes} servers at {n.node_bandwidth_Gbps:g} Gbit/s, files striped "
                     f"over {n.stripe_count} in {fmt_bytes(n.stripe_bytes)} units")
        disks = [("servers", n.node_storage)]
    for label, d in disks:
        lines.append(f"  {label:<8} {d.devices} x {d.kind} {d.model}: {d.sequential_read_MBps:g} "
                     f"MB/s sequential, {d.random_read_iops:,.0f} random reads/s at queue depth "
                     f"{d.queue_depth}, {d.latency_us:g} us alone")
    lines.append(f"  PCIe     {p.generation}.0 x{p.lanes}: {p.raw_GBps:.2f} GB/s raw, "
                 f"{p.copy_GBps(True):.2f} GB/s pinned, {p.copy_GBps(False):.2f} GB/s pageable")
    lines += ["  sources", *(f"    - {s}" for s in h.sources)]
    return "\n".join(lines)


def pipeline_timeline(f: FeedResult) -> Figure:
    """The GPU busy or waiting, and the batches ready for it, over the steady stretch of a
    later epoch (the prefill before it left out), its time counted from that stretch's start."""
    out = f.timeline
    t0 = out.steady_from_s
    fig = Figure(figsize=(9, 3.2))
    ax, aq = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1, 2]})
    for start, end, state in out.timeline:
        start = max(start, t0)
        if end > start:
            ax.broken_barh([(start - t0, end - start)], (0, 1),
                           color="#2ca02c" if state == "busy" else "#d62728")
    ax.set_yticks([])
    ax.set_ylabel("GPU", rotation=0, ha="right", va="center")
    ax.plot([], [], color="#2ca02c", lw=6, label="busy (the step)")
    ax.plot([], [], color="#d62728", lw=6, label="waiting (data stall, copy)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    steady = [(t - t0, q) for t, q in out.queue if t >= t0]
    if steady:
        t, q = np.array(steady, dtype=float).T
        aq.step(t, q, where="post", color="#1f77b4")
    aq.set_ylabel("batches ready")
    aq.set_xlabel("time in the steady stretch (s)")
    state = f"input-bound ({f.bottleneck})" if f.bound else "keeps up"
    ax.set_title(f"input pipeline on {f.host.name}: {state}; GPU waits "
                 f"{fmt_share(f.gpu_wait_share)} of the time", fontsize=9)
    fig.tight_layout()
    return fig
