"""BabelStream's kernels as ops: the memory benchmark real cards were measured with.

Arrays a, b, c of `array_elements` each live on the device before the kernels run, as in
BabelStream (init runs once, outside the timed loop). Each kernel is one op that streams its
arrays; dot also writes one partial sum per block. Bytes follow BabelStream's own count
(copy and mul 2 arrays, add and triad 3, dot 2), which is what its GB/s figures divide;
`init`, a store-only kernel that a workload may list, writes one array, as gpu-benches'
init kernel counts it.
"""

from __future__ import annotations

from simulator.config.workload import Execution
from simulator.workload.builder import TraceBuilder
from simulator.workload.trace import Phase, Trace, Unit

KERNELS = {  # name: (arrays read, array written)
    "init": ((), "a"),  # store only, as gpu-benches' init kernel (BabelStream's init is untimed)
    "copy": (("a",), "c"),
    "mul": (("c",), "b"),
    "add": (("a", "b"), "c"),
    "triad": (("b", "c"), "a"),
    "dot": (("a", "b"), None),
}
DOT_BLOCKS = 256  # BabelStream's CUDA dot: 256 blocks, one partial sum each


def build(name: str, raw: dict) -> Trace:
    # a native CUDA benchmark: its host launches kernels ahead, with no framework in between
    b = TraceBuilder(name, raw["dtype"], Execution(cuda_graphs=True))
    b.phase = Phase.FORWARD
    n = raw["array_elements"]
    arrays = {x: b.buffer(x, (n,)) for x in "abc"}
    sums = b.buffer("dot_partial_sums", (raw.get("dot_blocks", DOT_BLOCKS),))
    for kernel in raw["kernels"]:
        reads, written = KERNELS[kernel]
        out = arrays[written] if written else sums
        b.op(kernel, "elementwise" if written else "reduction",
             [arrays[x] for x in reads], [out], unit=Unit.VECTOR)
    return b.trace()
