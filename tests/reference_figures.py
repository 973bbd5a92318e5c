"""Figures the tests hold the simulator to (targets, not inputs), with where they come from.

Seed workloads: measured with PyTorch 2.13 (CPU build) on one full training step (the second),
FLOPs by torch.utils.flop_counter.FlopCounterMode, peak live bytes as the largest sum of live
tensor storage at an op boundary. Cards: published peak bandwidth (GB/s) and capacity (GB as
marketed, = GiB), each card's hardware file citing its source. Ramulator 2.1
(github.com/CMU-SAFARI/ramulator2, GDDR6 model, Samsung K4Z80325BC 14 Gb/s 1.25 V timings) run
on the traces benchmarks/reference_traces.py writes.
"""

TRANSFORMER = {
    "parameters": 54_390_544,
    "parameter_tensors": 187,
    "parameters_by_module": {"transformer": 44_140_544, "embedding": 5_120_000, "fc": 5_130_000},
    "parameter_bytes": 217_562_176,
    "forward_flops": 31_840_010_240,
    "backward_flops": 63_680_020_480,
    "step_flops": 95_520_030_720,
    "adam_state_bytes": 435_125_100,  # includes a 4 B step per tensor
    "peak_live_for_loop": 944_494_580,
    "peak_live_foreach": 1_100_616_756,
    "foreach_optimizer_read": 2_393_186_184,
    "foreach_optimizer_written": 1_522_935_980,
    "fused_optimizer_read": 870_250_200,
    "fused_optimizer_written": 870_249_452,
    "transposed_forward_flops": 31_580_487_680,
    "transposed_backward_flops": 63_160_975_360,
}

CNN = {
    "parameters": 431_080,
    "parameter_tensors": 8,
    "parameters_by_layer": {"conv1": 520, "conv2": 25_050, "fc1": 400_500, "fc2": 5_010},
    "forward_flops": 293_504_000,
    "forward_flops_by_layer": {"conv1": 36_864_000, "conv2": 204_800_000, "fc1": 51_200_000,
                               "fc2": 640_000},
    "backward_flops": 550_144_000,
    "step_flops": 843_648_000,
    "peak_live": 15_945_864,
    "peak_phase": "backward",
}

# name: (published peak bandwidth GB/s, capacity GB, memory type)
PUBLISHED = {
    "t4": (320, 16, "GDDR6"),
    "rtx-2080-ti": (616, 11, "GDDR6"),
    "titan-rtx": (672, 24, "GDDR6"),
    "rtx-3070": (448, 8, "GDDR6"),
    "rtx-a4000": (448, 16, "GDDR6"),
    "rtx-a2000": (288, 12, "GDDR6"),
    "rtx-a6000": (768, 48, "GDDR6"),
    "rtx-a5000": (768, 24, "GDDR6"),
    "rtx-a4500": (640, 20, "GDDR6"),
    "rtx-a5500": (768, 24, "GDDR6"),
    "quadro-rtx-5000": (448, 16, "GDDR6"),
    "quadro-rtx-6000": (672, 24, "GDDR6"),
    "quadro-rtx-8000": (672, 48, "GDDR6"),
    "rtx-6000-ada": (960, 48, "GDDR6"),
    "a10": (600, 24, "GDDR6"),
    "a40": (696, 48, "GDDR6"),
    "l4": (300, 24, "GDDR6"),
    "l40s": (864, 48, "GDDR6"),
    "rx-6900-xt": (512, 16, "GDDR6"),
    "rx-7900-xtx": (960, 24, "GDDR6"),
    "a100-40gb": (1555, 40, "HBM2"),
    "h100-sxm": (3352, 80, "HBM3"),
}

# Sustained DRAM bandwidth measured on real cards, GB/s (1e9 B/s), per
# BabelStream kernel of workloads/stream.json. The A40 and RX 6900 XT were measured with
# gpu-benches (te42kyfo/gpu-benches@1c36d50), whose kernels map onto BabelStream's by their
# traffic: scale (A=B*c, one read one write) for copy and mul, triad (two reads one write) for
# add and triad, read (reads only) for dot. The RTX 2080 Ti ran BabelStream v4.0 itself
# (iree-org/iree-experimental). Target: within 5 % (the measurements
# themselves vary by a few percent between runs and methods).
STREAM_MEASURED = {
    "a40": {"copy": 658, "mul": 658, "add": 663, "triad": 663, "dot": 679},
    "rtx-2080-ti": {"copy": 547.8, "mul": 544.9, "add": 556.7, "triad": 556.8, "dot": 574.5},
    "rx-6900-xt": {"copy": 461, "mul": 461, "add": 434, "triad": 434, "dot": 505},
}
# The same files' init kernel (A[i]=c: stores only), for workloads/stream.json's arrays with
# the store-only `init` kernel (write-only streams, which per-bank refresh must keep up with).
# The L40's (846) stands in for the L40S beside them in the benchmark, not in the tests.
STREAM_INIT_MEASURED = {"a40": 679, "rx-6900-xt": 504}
STREAM_INIT_PROXY = {"l40s": ("L40", 846)}


def stream_hardware(card: str):
    """The card as its stream figures were measured: ECC off. gpu-benches' A40 and L40 streamed
    at 94-98 % of peak, which inline ECC, on by default on both, does not allow (fetching the
    check bits costs GDDR cards about a fifth of their bandwidth: NVIDIA's CUDA C++ Best
    Practices Guide, "Theoretical Bandwidth Calculation"); the other cards run none."""
    import dataclasses

    from simulator.config.hardware import load_hardware

    hw = load_hardware(card)
    return dataclasses.replace(hw, memory=dataclasses.replace(hw.memory, ecc="off"))
