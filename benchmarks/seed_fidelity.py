"""Print the seed workloads' generated figures beside the PyTorch-measured reference ones.

    python benchmarks/seed_fidelity.py
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reference_figures import CNN, TRANSFORMER  # noqa: E402

from simulator.config.workload import load_workload  # noqa: E402
from simulator.workload.generate import build_trace  # noqa: E402
from simulator.workload.memory import profile  # noqa: E402
from simulator.workload.trace import Phase  # noqa: E402


def variant(name: str, impl: str):
    spec = load_workload(name)
    return dataclasses.replace(spec, optimizer=dataclasses.replace(spec.optimizer,
                                                                   implementation=impl))


def row(label: str, ours: float, ref: float) -> None:
    err = (ours / ref - 1) * 100 if ref else 0.0
    print(f"  {label:<38} {ours:>18,.0f} {ref:>18,.0f} {err:>+9.4f} %")


def main() -> None:
    print(f"  {'figure':<38} {'simulator':>18} {'PyTorch':>18} {'error':>11}")
    print("transformer (foreach Adam, fused attention as on CUDA)")
    t = build_trace(variant("transformer", "foreach"))
    row("parameters", t.parameter_count, TRANSFORMER["parameters"])
    row("forward FLOPs", t.flops(Phase.FORWARD), TRANSFORMER["forward_flops"])
    row("backward FLOPs (recomputing attention)", t.flops(Phase.BACKWARD),
        TRANSFORMER["backward_flops"])
    row("step FLOPs", t.flops(), TRANSFORMER["step_flops"])
    row("peak live bytes, foreach", profile(t).peak_bytes, TRANSFORMER["peak_live_foreach"])
    opt = t.ops_in(Phase.OPTIMIZER)
    row("optimizer bytes read, foreach", sum(o.bytes_read for o in opt),
        TRANSFORMER["foreach_optimizer_read"])
    row("optimizer bytes written, foreach", sum(o.bytes_written for o in opt),
        TRANSFORMER["foreach_optimizer_written"])
    loop = build_trace(variant("transformer", "for_loop"))
    row("peak live bytes, for_loop", profile(loop).peak_bytes, TRANSFORMER["peak_live_for_loop"])
    print("cnn (foreach Adam)")
    c = build_trace(variant("cnn", "foreach"))
    row("parameters", c.parameter_count, CNN["parameters"])
    row("forward FLOPs", c.flops(Phase.FORWARD), CNN["forward_flops"])
    row("backward FLOPs", c.flops(Phase.BACKWARD), CNN["backward_flops"])
    row("peak live bytes", profile(c).peak_bytes, CNN["peak_live"])


if __name__ == "__main__":
    main()
