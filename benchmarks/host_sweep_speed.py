"""Wall time of a host sweep: ResNet-50 on the A10 fed by each of three hosts, at
sampled fidelity, as a user runs it (a fresh process, default workers), for the shipped
workload (batch 32) and at batch 256 with AMP; and the input pipeline's own share (one host's
analysis: its runs, cold, warm, supply and the remedies).

    python benchmarks/host_sweep_speed.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from simulator.config.host import load_host  # noqa: E402
from simulator.config.workload import parse_workload  # noqa: E402
from simulator.feed.analysis import analyze_feed  # noqa: E402

HOSTS = "hdd-server,sata-ssd-server,nvme-workstation"


def sweep_seconds(workload: str, out: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "simulator", "sweep", workload, "--hardware", "a10",
                    "--host", HOSTS, "--fidelity", "sampled", "--out", str(out)],
                   check=True, capture_output=True, cwd=REPO)
    return time.perf_counter() - start


def main() -> None:
    doc = json.loads((REPO / "workloads/resnet50.json").read_text())
    doc["name"] = "resnet50-b256-amp"
    doc["data"]["batch_size"] = 256
    doc["training"]["mixed_precision"] = "fp16"
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "resnet50-b256-amp.json"
        big.write_text(json.dumps(doc))
        for label, workload in (("resnet50 (batch 32)", "resnet50"),
                                ("resnet50 batch 256 AMP", str(big))):
            s = sweep_seconds(workload, Path(tmp) / label.replace(" ", "_"))
            print(f"sweep --host {HOSTS} on a10, {label}, sampled: {s:.1f} s wall")
        spec = parse_workload(doc, "resnet50-b256-amp")
        for host in HOSTS.split(","):
            start = time.perf_counter()
            f = analyze_feed(spec, load_host(host), 0.38)
            print(f"  input pipeline alone on {host} (batch 256, a 0.38 s step): "
                  f"{time.perf_counter() - start:.2f} s, {len(f.remedies)} remedies simulated")


if __name__ == "__main__":
    main()
