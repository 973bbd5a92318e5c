"""Text and JSON reports of a `dram` run. Every statistic says what it counts and in which unit."""

from __future__ import annotations

from typing import Any

from simulator.config.hardware import Hardware
from simulator.dram.system import DramStats


def dram_doc(stats: DramStats, hw: Hardware, trace: str) -> dict[str, Any]:
    return {"format": "gddr6-roofline-sim/dram", "format_version": 1, "trace": trace,
            "hardware": hw.name, "hardware_path": hw.path, **stats.as_dict()}


def dram_report(stats: DramStats, hw: Hardware, trace: str) -> str:
    d = stats.as_dict()
    lat_ns, lat_ck = d["read_latency_ns"], d["read_latency_cycles"]
    cmds = d["commands"]
    util = d["channel_utilization"]
    lines = [
        f"Trace     {trace}",
        f"Memory    {hw.display_name} ({hw.name}): {len(util)} channels x 16 bit @ "
        f"{hw.memory.data_rate_gbps:g} Gb/s per pin, CK {1 / stats.tck_ns * 1e3:.1f} MHz "
        f"(tCK {stats.tck_ns:.3f} ns)",
        "",
        f"  requests              {d['requests']:,} ({d['reads']:,} reads, {d['writes']:,} writes),"
        f" {d['bytes']:,} B",
        f"  simulated time        {d['cycles']:,} CK cycles = {d['time_ns'] / 1e3:,.2f} us",
        f"  bandwidth             {d['bandwidth_GBps']:.2f} GB/s of {d['peak_bandwidth_GBps']:.2f}"
        f" GB/s peak ({d['percent_of_peak']:.1f} %)",
        f"  read latency          mean {lat_ns['mean']:.1f} ns, p50 {lat_ns['p50']:.1f} ns, "
        f"p99 {lat_ns['p99']:.1f} ns  (= {lat_ck['mean']:.1f} / {lat_ck['p50']:.0f} / "
        f"{lat_ck['p99']:.0f} CK, from acceptance to data return)",
        f"  row buffer            {d['row_hit_rate'] * 100:.2f} % hits; {d['row_hits']:,} hits, "
        f"{d['row_misses']:,} misses (bank closed), {d['row_conflicts']:,} conflicts "
        "(other row open)",
        "  commands              " + ", ".join(f"{k} {cmds[k]:,}" for k in
                                                ("ACT", "PRE", "RD", "WR", "REF")),
        f"  refresh               {d['refreshes']:,} ({cmds['REFab']:,} all-bank, "
        f"{cmds['REFpb']:,} per-bank); {d['refresh_time_share'] * 100:.2f} % of channel time",
        f"  read/write turnaround {d['turnaround_time_share'] * 100:.2f} % of channel time "
        "(estimated from RD<->WR switches)",
        f"  data-bus utilization  mean {sum(util) / len(util) * 100:.1f} %, "
        f"min {min(util) * 100:.1f} %, max {max(util) * 100:.1f} % per channel",
        f"  energy                {d['energy_pJ'] / 1e6:,.2f} uJ ({d['energy_model']})",
    ]
    if d["reads_forwarded_from_write_buffer"]:
        lines.append(f"  forwarded reads       {d['reads_forwarded_from_write_buffer']:,} "
                     "served from the write buffer")
    return "\n".join(lines)
