"""The input pipeline (simulator/feed/) against measured loaders.

1. A multi-process JPEG loader measured on one machine (benchmarks/measure_loader.py, data in
   benchmarks/measured/loader/): the simulation gets that machine's measured per-core decode and
   copy rates as its host, and predicts what 1 and 2 workers supply and how long a consumer
   taking one batch per GPU step waits per step. Targets: samples/s within 15 % (the spread of
   repeated measurements on a shared 2-core machine is some 5-10 %), and the wait per step
   within 15 % of the step's period (a wait near 0 has no relative error to speak of).
2. tensorpack's ImageNet reading benchmark (tensorpack/benchmarks@9822088, ImageNet/README.md):
   tf.data with 40 parallel decoders reaches 11,000 images/s on a DGX-1 (two 20-core Xeon
   E5-2698 v4). This is the source of the shipped hosts' per-core JPEG rate, so it checks only
   that the pipeline around the decoders (reads, collation, queues) costs what it should on
   40 cores: a consistency check, not independent validation.

    python benchmarks/input_fidelity.py
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

from simulator.config.dataset import DatasetSpec, LoaderSpec
from simulator.config.host import Cpu, Disk, Host, Pcie, load_host
from simulator.feed.simulation import Scenario, simulate, steps_for
from simulator.units import GiB

MEASURED = Path(__file__).parent / "measured" / "loader"
TOLERANCE = 0.15
CROP_BYTES = 3 * 224 * 224 * 4


def measured_host(m: dict) -> Host:
    """The machine the loader was measured on, from its measured rates. Every read is a page
    cache hit (the files had just been written), so the disk is a placeholder; the consumer
    has no GPU, so the link is the fastest there is and the copy overlapped."""
    disk = Disk("nvme", "placeholder: every read hits the page cache", 1, 7000, 1e6, 512, 45)
    return Host(name="measured", display_name=m["cpu"], description="", sources=(),
                cpu=Cpu(m["cpu"], m["cores"], m["jpeg_megapixels_per_s"], m["copy_GBps"],
                        1550.0),
                ram_bytes=64 * GiB, reserved_bytes=4 * GiB, storage=disk, network=None,
                pcie=Pcie(6, 16))


def check_measured_loader() -> list[tuple[str, float, float, bool]]:
    m = json.loads((MEASURED / "host.json").read_text())
    host = measured_host(m)
    ds = DatasetSpec(name="JPEG stand-ins", samples=m["samples"],
                     bytes_per_sample=m["jpeg_bytes_per_sample"], format="jpeg",
                     collated_bytes_per_sample=CROP_BYTES, access="random",
                     megapixels_per_sample=m["width"] * m["height"] / 1e6)
    out = []
    with open(MEASURED / "runs.csv") as f:
        for row in csv.DictReader(f):
            workers, gpu = int(row["workers"]), float(row["gpu_step_s"])
            ld = LoaderSpec(workers=workers, prefetch_factor=int(row["prefetch_factor"]),
                            pin_memory=False, copy="overlapped")
            batch = int(row["batch"])
            sim = simulate(Scenario(host, ds, ld, batch, gpu, 1.0,
                                    steps_for(workers, ld.prefetch_factor)))
            rate, wait = batch / sim.period_s, sim.wait_s_per_step
            got_rate, got_wait = float(row["samples_per_s"]), float(row["wait_s_per_step"])
            period = batch / got_rate
            label = f"{workers} worker{'s' * (workers > 1)}, GPU step {gpu * 1e3:.0f} ms"
            out.append((f"{label}: samples/s", got_rate, rate,
                        abs(rate / got_rate - 1) <= TOLERANCE))
            out.append((f"{label}: wait per step (ms)", got_wait * 1e3, wait * 1e3,
                        abs(wait - got_wait) <= TOLERANCE * period))
    return out


def check_tensorpack() -> tuple[str, float, float, bool]:
    ref = load_host("sata-ssd-server")   # two Xeon E5-2698 v4, the DGX-1's CPUs
    host = dataclasses.replace(ref, ram_bytes=1024 * GiB)   # the benchmark's data: cached
    ds = DatasetSpec(name="ImageNet", samples=1281167, bytes_per_sample=115000, format="jpeg",
                     collated_bytes_per_sample=224 * 224 * 3, access="random",
                     megapixels_per_sample=469 * 387 / 1e6)   # tf.data keeps uint8 images
    ld = LoaderSpec(workers=40, prefetch_factor=2, pin_memory=False, copy="overlapped")
    sim = simulate(Scenario(host, ds, ld, 128, 0.0, 1.0, steps_for(40, 2)))
    rate = 128 / sim.period_s
    return ("tensorpack tf.data on a DGX-1, 40 decoders (consistency)", 11000.0, rate,
            abs(rate / 11000 - 1) <= TOLERANCE)


def main() -> None:
    rows = check_measured_loader() + [check_tensorpack()]
    width = max(len(r[0]) for r in rows)
    print(f"{'case':<{width}}  {'measured':>9}  {'simulated':>9}  error   within 15 %")
    for label, got, sim, ok in rows:
        err = f"{sim / got - 1:+.1%}" if got > 1e-3 else "-"
        print(f"{label:<{width}}  {got:>9.1f}  {sim:>9.1f}  {err:>6}  {'yes' if ok else 'NO'}")
    held = sum(r[3] for r in rows)
    print(f"\n{held} of {len(rows)} within tolerance")


if __name__ == "__main__":
    main()
