"""The compute side (simulator/gpu/): clocks under load, the library's kernels, cuDNN's
convolution algorithms, the host's per-op dispatch, and how the replay reports them."""

import dataclasses
import json

import pytest
from conftest import REPO, load_benchmark

from simulator.config.hardware import load_hardware
from simulator.config.workload import Execution, load_workload
from simulator.gpu import library
from simulator.gpu.clocks import Clocks, ClockState, clocks
from simulator.gpu.compute import GemmShape, gemm_plan, kernel_compute, matmul_candidates
from simulator.gpu.convolution import conv_algorithms, is_weight_grad
from simulator.gpu.dispatch import DISPATCH_US, ISSUE_SHARE, dispatch_s
from simulator.pipeline import Step
from simulator.replay import SEPARATION, replay, separation
from simulator.replay.bottleneck import timeline_s
from simulator.workload import layers as L
from simulator.workload.builder import TraceBuilder
from simulator.workload.generate import build_trace
from simulator.workload.trace import Category, Unit


@pytest.fixture(scope="module")
def t4():
    return load_hardware("t4")


def _conv(c_in=64, c_out=64, size=28, kernel=3, stride=1, dtype="fp32", tf32=False,
          operand_values="random"):
    b = TraceBuilder("kernel", dtype, Execution(allow_tf32_conv=tf32,
                                                operand_values=operand_values))
    w = b.parameter("conv.weight", (c_out, c_in, kernel, kernel), matmul_weight=True)
    x = b.tensor("x", (16, c_in, size, size), Category.INPUT)
    L.conv2d(b, x, w, None, stride, kernel // 2, "conv")
    return b.trace()


def _elementwise_chain(n: int, rows: int, execution: Execution | None = None,
                       rows_first: int | None = None, wait_after_first: bool = False):
    """n relus, each on the one before's output; the first on `rows_first` rows where given
    (the rest then start from an input of their own), and read on the host (`.item()`-like)
    where `wait_after_first`."""
    b = TraceBuilder("chain", "fp32", execution)
    x = None
    for i in range(n):
        shape = (rows_first if i == 0 and rows_first else rows, 256)
        if x is None or x.shape != shape:
            x = b.tensor(f"x{i}", shape, Category.INPUT)
        y = b.activation(f"relu{i}.out", shape, x)
        b.op(f"relu{i}", "elementwise", [x], [y], host_waits=wait_after_first and i == 0)
        x = y
    return b.trace()


# --- clocks -----------------------------------------------------------------------------------

def test_a_card_runs_at_its_sustained_clock_once_hot_and_nearer_boost_when_cool(t4):
    clk = clocks(t4)
    assert clk.stated and clk.scale == pytest.approx(900 / 1590)
    assert not clocks(load_hardware("a10")).stated and clocks(load_hardware("a10")).scale == 1
    work = 1e-3  # boost-clock seconds
    hot = ClockState(clk, heat=1.0).stretch(work)
    cool = ClockState(clk, heat=0.0).stretch(work)
    assert hot == pytest.approx(work / clk.scale)
    assert work < cool < hot
    # a short kernel from cool runs at about boost; a long one at about the sustained clock
    assert ClockState(clk, 0.0).stretch(1e-6) == pytest.approx(1e-6, rel=1e-3)
    assert ClockState(clk, 0.0).stretch(1.0) == pytest.approx(1.0 / clk.scale, rel=0.01)


def test_busy_heats_the_card_and_idle_cools_it():
    state = ClockState(Clocks(2000, 1000), heat=0.0, response_s=1e-3)
    state.busy(1e-3)
    assert state.heat == pytest.approx(1 - 1 / 2.718281828, rel=1e-6)
    assert state.scale == pytest.approx(1 - 0.5 * state.heat)
    state.idle(10.0)
    assert state.heat == pytest.approx(0.0, abs=1e-12) and state.scale == pytest.approx(1.0)
    # a card whose sustained clock is above the rated boost (GPU Boost) runs faster when hot
    fast = ClockState(Clocks(1500, 1800), heat=1.0)
    assert fast.stretch(1e-3) == pytest.approx(1e-3 * 1500 / 1800)


def test_zero_operands_lift_a_power_capped_clock_never_above_boost(t4):
    """He (2024): an A100 at its power cap, 295 TFLOP/s on zeros, 257 on randn."""
    clk = clocks(t4)
    assert clk.floor() == clk.scale
    assert clk.floor("zeros") == pytest.approx(900 / 1590 * 295 / 257)
    assert Clocks(2000, 1900).floor("zeros") == 1.0          # held near boost: up to boost
    assert Clocks(1500, 1800).floor("zeros") == 1800 / 1500  # not power-held: as it was
    assert clocks(load_hardware("a10")).floor("zeros") == 1.0
    hot = ClockState(clk, heat=1.0, operand_values="zeros")
    assert hot.stretch(1e-3) == pytest.approx(1e-3 / clk.floor("zeros"))
    # a long convolution replayed on zeros: faster on the capped T4, the same where no
    # sustained clock is stated (the A10 runs at its boost clock either way)
    times = {}
    for card in (t4, load_hardware("a10")):
        for values in ("random", "zeros"):
            trace = _conv(c_in=256, c_out=256, size=56, operand_values=values)
            times[card.name, values] = replay(trace, card, "sampled").step_time_s
    assert times["t4", "zeros"] < 0.95 * times["t4", "random"]
    assert times["a10", "zeros"] == pytest.approx(times["a10", "random"])


def test_operand_values_are_checked_as_the_workload_loads(tmp_path):
    from simulator.config.workload import load_workload
    from simulator.errors import InputError
    raw = json.loads((REPO / "workloads" / "cnn.json").read_text())
    path = tmp_path / "cnn.json"
    for values in ("zeros", "ones"):
        raw["training"]["execution"] = {"operand_values": values}
        path.write_text(json.dumps(raw))
        if values == "zeros":
            assert load_workload(path).execution.operand_values == "zeros"
    with pytest.raises(InputError, match="operand_values") as err:
        load_workload(path)
    assert "random" in str(err.value) and "zeros" in str(err.value)


def test_clocks_are_checked_as_the_hardware_file_loads(tmp_path):
    raw = json.loads((REPO / "hardware" / "t4.json").read_text())
    raw["compute"]["clocks_mhz"] = {"boost": 1590}
    path = tmp_path / "t4.json"
    path.write_text(json.dumps(raw))
    from simulator.errors import InputError
    with pytest.raises(InputError, match="sustained"):
        load_hardware(str(path))


def test_analytic_keeps_the_datasheet_peak(t4):
    """The plain roofline: no clock, no library losses, no host."""
    trace = _conv()
    est = replay(trace, t4, "analytic")
    op = trace.ops[0]
    assert est.ops[0].compute_s == pytest.approx(op.flops / (t4.peak_tflops["fp32"] * 1e12))


# --- the library's kernels --------------------------------------------------------------------

def test_library_coefficients_are_what_the_fit_script_writes():
    """simulator/gpu/library_efficiency.json comes from benchmarks/fit_library_efficiency.py
    on the shipped kernel data: refitting reproduces it."""
    fit = load_benchmark("fit_library_efficiency")
    shipped = json.loads(library.COEFFICIENTS.read_text())
    h200 = load_hardware("h200")
    for name, rows in fit.h200_cases(h200).items():
        fam, median, _ = fit.fit_family(rows, name, h200.sm_count)
        for key in ("mainloop", "k_overhead", "unaligned", "tile_reuse"):
            assert getattr(fam, key) == pytest.approx(shipped["families"][name][key], rel=0.02,
                                                      abs=0.01), (name, key)
        assert median == pytest.approx(shipped["families"][name]["median_abs_error"], abs=0.01)
    v100 = load_hardware("v100-pcie-32gb")
    fam, median, _ = fit.fit_family(fit.v100_cases(v100, "train"), "simt_volta", v100.sm_count)
    for key in ("mainloop", "k_overhead", "unaligned", "tile_reuse"):
        assert getattr(fam, key) == pytest.approx(shipped["families"]["simt_volta"][key],
                                                  rel=0.02, abs=0.01), key
    assert median == pytest.approx(shipped["families"]["simt_volta"]["median_abs_error"],
                                   abs=0.01)
    costs, median, _ = fit.fit_conv(fit.conv_cases(v100), v100)
    for key in library.CONV_COST_KEYS:
        assert getattr(costs, key) == pytest.approx(shipped["convolution"][key], rel=0.02,
                                                    abs=0.01), key
    assert median == pytest.approx(shipped["convolution"]["median_abs_error"], abs=0.01)


def test_the_per_kernel_convolution_time_stands_for_a_loss_of_short_convolutions_alone():
    """Without the fixed time per kernel, the V100's short convolutions run far slower than the
    model and its long ones near it, while its GEMMs of the same durations need no such term
    (docs/validation.md: 1.85 / 1.68 against 1.21 / 1.00 under 0.5 ms, 1.06 against 1.00 over
    5 ms)."""
    fit = load_benchmark("fit_library_efficiency")
    v100 = load_hardware("v100-pcie-32gb")
    conv, gemm = fit.duration_ratios(fit.conv_cases(v100), library.conv_costs(),
                                     fit.v100_cases(v100, "train"),
                                     library.families()["simt_volta"], v100).values()
    assert len(conv) == len(gemm) == len(fit.DURATION_BINS) - 1
    assert all(n > 50 for n, _ in conv) and all(n > 500 for n, _ in gemm)
    assert conv[1][1] > 1.5 and conv[-1][1] < 1.15  # 0.2-0.5 ms; over 5 ms
    assert [ratio for _, ratio in conv] == sorted((ratio for _, ratio in conv), reverse=True)
    assert all(abs(ratio - 1) < 0.1 for _, ratio in gemm[1:])


def test_volta_runs_a_simt_family_of_its_own_that_holds_on_another_campaign():
    """Fitted on the V100's GEMMs of NeuSight's profiles, Volta's family times the V100's GEMMs
    of NeuSight's test set (transformer shapes, another campaign) within 10 % at the median,
    where the H200's family, fitted on another SM design, is about a third slow; Turing keeps
    the H200's, which its T4 GEMMs hold to (test_measured_fidelity)."""
    fit = load_benchmark("fit_library_efficiency")
    v100 = load_hardware("v100-pcie-32gb")
    held_out = fit.v100_cases(v100, "test")
    assert len(held_out) > 1000
    volta = fit._held_out(held_out, library.families()["simt_volta"], v100.sm_count)
    hopper = fit._held_out(held_out, library.families()["simt"], v100.sm_count)
    assert volta[0] < 0.10 and volta[1] < 0.25 and abs(volta[2]) < 0.10
    assert hopper[2] > 0.25
    assert library.family_of("fp32", v100.chip) == "simt_volta"
    assert library.family_of("fp32", load_hardware("t4").chip) == "simt"
    assert library.family_of("fp32") == "simt" and library.family_of("fp16_tensor", "GV100") == \
        "tensor"
    assert library.kernel_family("fp32", "GV100").cuda_cores


def test_a_smaller_k_loop_and_an_unaligned_operand_cost_efficiency():
    fam = library.KernelFamily("tensor", 0.9, 64.0, 0.3, 0.0)
    _, long_k = gemm_plan(GemmShape(1, 4096, 4096, 4096), fam, 80, 2)
    _, short_k = gemm_plan(GemmShape(1, 4096, 4096, 64), fam, 80, 2)
    assert short_k == pytest.approx(0.9 * 64 / 128) and long_k > short_k
    _, unaligned = gemm_plan(GemmShape(1, 4096, 2500, 4096), fam, 80, 2)  # 5000 B rows
    _, aligned = gemm_plan(GemmShape(1, 4096, 2504, 4096), fam, 80, 2)
    assert unaligned == pytest.approx(0.3 * aligned)


def _linear_ops(out_f: int, dtype: str = "fp16", cublas_major: int = 12):
    b = TraceBuilder("k", dtype, Execution(cublas_major=cublas_major))
    x = b.tensor("x", (4096, 1024), Category.INPUT, requires_grad=True)
    b.backward(L.linear(b, x, b.parameter("w", (out_f, 1024), matmul_weight=True), None, "fc"))
    return {o.name: o for o in b.trace().ops if o.kind == "matmul"}


def test_a_linear_forward_reads_both_operands_along_k_so_only_k_decides_alignment():
    """x W^T (cuBLAS's TN GEMM): an odd out_features is the output's row only; the backward
    products read the gradient along it (grad_input's K, grad_weight's M)."""
    hw = load_hardware("rtx-a6000")
    odd, even = _linear_ops(1001), _linear_ops(1008)
    assert odd["fc"].layout == "tn"
    eff = {n: kernel_compute(hw, o).library_efficiency for n, o in odd.items()}
    ref = {n: kernel_compute(hw, o).library_efficiency for n, o in even.items()}
    assert eff["fc"] == pytest.approx(ref["fc"], rel=0.02)
    assert eff["fc.grad_input"] < 0.5 * ref["fc.grad_input"]


def test_cublas_10_runs_16_bit_gemms_off_multiples_of_8_on_the_cuda_cores():
    for out_f, cublas, math in ((1001, 10, "fp32"), (1008, 10, "fp16"), (1001, 11, "fp16")):
        ops = _linear_ops(out_f, cublas_major=cublas)
        assert {o.math_dtype for o in ops.values()} == {math}, (out_f, cublas)
    assert {o.math_dtype for o in _linear_ops(1001, "fp32", 10).values()} == {"fp32"}


def _tf32_matmul(m: int, n: int, k: int, batch: int = 1):
    b = TraceBuilder("k", "fp32", Execution(allow_tf32_matmul=True))
    x = b.tensor("x", (batch, m, k), Category.INPUT)
    w = b.tensor("w", (batch, k, n), Category.INPUT)
    y = b.tensor("y", (batch, m, n), Category.ACTIVATION)
    L.bmm(b, "mm", [x, w], [y], 2 * batch * m * n * k, dims=(m, n, k))
    return b.trace().ops[0]


def test_tf32_allowed_the_library_runs_a_matmul_where_it_finishes_first():
    """TF32 allows the tensor cores, it does not require them: a GeForce Ampere card's TF32
    rate is its FP32 one, so a short K loop (attention's K = 64) runs faster as an FP32 kernel
    on the CUDA cores; a professional GA102's TF32 rate is twice its FP32 one, and a long
    aligned product stays on the tensor cores; Hopper's TF32 rate is seven times its FP32."""
    scores = _tf32_matmul(512, 512, 64, batch=192)
    long_k = _tf32_matmul(4096, 4096, 4096)
    odd_k = _tf32_matmul(512, 6144, 267735)  # a vocabulary head's input gradient
    for card, op, unit in (("rtx-3070", scores, "fp32"), ("rtx-a6000", scores, "fp32"),
                           ("rtx-a6000", long_k, "tf32_tensor"),
                           ("rtx-a6000", odd_k, "fp32"), ("h100-sxm", scores, "tf32_tensor"),
                           ("h100-sxm", odd_k, "tf32_tensor")):
        hw = load_hardware(card)
        both = matmul_candidates(hw, op)
        assert [c.ceiling.key for c in both] == ["tf32_tensor", "fp32"]
        chosen = kernel_compute(hw, op)
        assert chosen.ceiling.key == unit, (card, op.flops)
        assert chosen.time_s == min(c.time_s for c in both)
    t4 = load_hardware("t4")  # no TF32 unit: the FP32 kernels alone
    assert [c.ceiling.key for c in matmul_candidates(t4, scores)] == ["fp32"]


def test_a_tf32_matmul_runs_on_tensor_cores_with_its_chips_family_and_fp32_the_cuda_cores():
    """Warp-level MMA chips (Ampere, Ada) run TF32 as efficiently as 16-bit MMA; Hopper, and a
    chip not known, the TF32 family fitted on the H200."""
    for card, tf32_family in (("rtx-a6000", "tensor"), ("rtx-6000-ada", "tensor"),
                              ("h100-sxm", "tensor_tf32")):
        hw = load_hardware(card)
        for tf32, family in ((True, tf32_family), (False, "simt")):
            b = TraceBuilder("k", "fp32", Execution(allow_tf32_matmul=tf32))
            w = b.parameter("w", (1024, 1024), matmul_weight=True)
            L.linear(b, b.tensor("x", (4096, 1024), Category.INPUT), w, None, "fc")
            kc = kernel_compute(hw, b.trace().ops[0])
            assert library.family_of(kc.ceiling.key, hw.chip) == family, card
    assert library.family_of("tf32_tensor") == "tensor_tf32"
    assert library.family_of("tf32_tensor", "GA102") == "tensor"
    assert library.family_of("tf32_tensor", "Navi 31") == "tensor_tf32"
    assert library.family_of("fp16_tensor", "GH100") == "tensor"
    from simulator.gpu.model import compute_settings
    by_peak = compute_settings(load_hardware("rtx-a6000"))["library"]["family_by_peak"]
    assert by_peak["tf32_tensor"] == "tensor" and by_peak["fp32"] == "simt"
    assert "tf32_tensor" not in compute_settings(load_hardware("t4"))["library"]["family_by_peak"]


# --- convolutions -----------------------------------------------------------------------------

def test_winograd_is_a_candidate_for_fp32_3x3_stride_1_convolutions_only(t4):
    costs = library.conv_costs()

    def names(trace, simt=True):
        op = trace.ops[0]
        shape = GemmShape(1, 1, 1, 1)
        return [a.name for a in conv_algorithms(op, shape, simt, costs)]

    assert names(_conv()) == ["implicit_gemm", "winograd_fused_2x2", "winograd_nonfused_4x4"]
    assert names(_conv(stride=2)) == ["implicit_gemm"]
    assert names(_conv(kernel=1)) == ["implicit_gemm"]
    assert names(_conv(), simt=False) == ["implicit_gemm"]  # tensor cores: implicit GEMM
    # cuDNN's Winograd kernels take float and half data, not double: an FP64 3x3 convolution
    # runs the implicit GEMM at the full count of multiplies
    assert names(_conv(dtype="fp16")) == names(_conv())
    assert names(_conv(dtype="fp64")) == ["implicit_gemm"]
    fp64 = kernel_compute(t4, _conv(c_in=256, c_out=256, dtype="fp64").ops[0])
    assert fp64.algorithm == "implicit_gemm" and fp64.ceiling.key == "fp64"
    # the fastest is taken: never slower than the implicit GEMM alone
    op = _conv(c_in=256, c_out=256).ops[0]
    kc = kernel_compute(t4, op)
    assert kc.algorithm.startswith("winograd")


def test_the_winograd_transforms_run_as_kernels_of_their_own():
    """Fused: a kernel turns the 3x3 filters into 4x4 ones (read 9, write 16 floats each);
    non-fused: three transform kernels around a cuBLAS SGEMM, which keeps cuBLAS's tiles and
    per-tile overhead where cuDNN's own kernels have theirs."""
    costs = library.conv_costs()
    n, c, size = 16, 64, 8  # _conv's batch
    op = _conv(c_in=c, c_out=c, size=size).ops[0]
    algos = {a.name: a for a in conv_algorithms(op, GemmShape(1, 1, 1, 1), True, costs)}
    fused, nonfused = algos["winograd_fused_2x2"], algos["winograd_nonfused_4x4"]
    assert (algos["implicit_gemm"].kernels, fused.kernels, nonfused.kernels) == (2, 2, 4)
    assert fused.transform_bytes == (9 + 16) * c * c * 4
    tiles = n * (size // 4) ** 2
    image = n * c * size * size
    assert nonfused.transform_bytes == 4 * (2 * image + 2 * 36 * tiles * c + 45 * c * c)
    simt = library.families()["simt"]
    assert nonfused.family(simt, costs).k_overhead == simt.k_overhead
    assert fused.family(simt, costs).k_overhead == costs.k_overhead
    assert nonfused.launched[1] == library.TILES and fused.launched[1] != library.TILES


def _conv_weight_grad(c_in=64, c_out=128, size=28, kernel=3, stride=1):
    """The weight gradient of _conv's convolution (batch 16): conv, then backward."""
    b = TraceBuilder("kernel", "fp32", Execution())
    w = b.parameter("conv.weight", (c_out, c_in, kernel, kernel), matmul_weight=True)
    x = b.tensor("x", (16, c_in, size, size), Category.INPUT)
    y = L.conv2d(b, x, w, None, stride, kernel // 2, "conv")
    b.backward(y)
    return next(o for o in b.trace().ops if o.name == "conv.grad_weight")


def test_the_weight_gradient_of_a_3x3_stride_1_convolution_may_run_non_fused_winograd(t4):
    """cuDNN's WINOGRAD_NONFUSED weight gradient: the image's and the output gradient's tiles
    transformed, 36 GEMMs of C_out x C_in over the batch's 4x4 tiles, the 36 points turned
    back into 3x3 filters: the forward's bytes, the GEMM's roles swapped."""
    costs = library.conv_costs()
    n, c_in, c_out, size = 16, 64, 128, 28
    op = _conv_weight_grad(c_in, c_out, size)
    assert is_weight_grad(op)
    algos = {a.name: a for a in conv_algorithms(op, GemmShape(1, 1, 1, 1), True, costs)}
    assert list(algos) == ["implicit_gemm", "winograd_nonfused_4x4"]  # no fused one
    nonfused = algos["winograd_nonfused_4x4"]
    tiles = n * (size // 4) ** 2
    assert (nonfused.gemm.batch, nonfused.gemm.m, nonfused.gemm.n, nonfused.gemm.k) == \
        (36, c_out, c_in, tiles)
    forward = {a.name: a for a in conv_algorithms(_conv(c_in, c_out, size).ops[0],
                                                  GemmShape(1, 1, 1, 1), True, costs)}
    assert nonfused.transform_bytes == forward["winograd_nonfused_4x4"].transform_bytes
    assert nonfused.flops == forward["winograd_nonfused_4x4"].flops
    assert (nonfused.kernels, nonfused.cudnn_kernel) == (4, False)
    # implicit GEMM only: strided, 1x1, or on the tensor cores
    for other in (_conv_weight_grad(stride=2), _conv_weight_grad(kernel=1)):
        assert [a.name for a in conv_algorithms(other, GemmShape(1, 1, 1, 1), True, costs)] \
            == ["implicit_gemm"]
    assert [a.name for a in conv_algorithms(op, GemmShape(1, 1, 1, 1), False, costs)] == \
        ["implicit_gemm"]
    # a large image at batch 16: the transform's fourfold saving wins
    big = _conv_weight_grad(256, 256, 28)
    assert kernel_compute(t4, big).algorithm == "winograd_nonfused_4x4"


def test_the_weight_gradient_is_told_by_its_shapes_under_autocast_too():
    """Batch 64 matches the first layers' 64 channels: the shapes alone must still tell."""
    for precision in (None, "fp16"):
        raw = json.loads((REPO / "workloads" / "resnet50.json").read_text())
        raw["data"]["batch_size"] = 64
        if precision:
            raw["training"]["mixed_precision"] = precision
        from simulator.config.workload import parse_workload
        trace = Step(parse_workload(raw, "resnet50")).trace
        convs = [o for o in trace.ops if o.kind == "conv"]
        assert convs and all(is_weight_grad(o) == o.name.endswith("grad_weight") for o in convs)


# --- the host ---------------------------------------------------------------------------------

def test_a_lone_op_waits_for_the_host_and_a_graph_does_not(t4):
    eager = replay(_elementwise_chain(1, 64), t4, "sampled")
    graph = replay(_elementwise_chain(1, 64, Execution(cuda_graphs=True)), t4, "sampled")
    op = eager.ops[0]
    assert op.launch_s == pytest.approx(DISPATCH_US["elementwise"] * 1e-6 + 2e-6)
    assert graph.ops[0].launch_s == pytest.approx(2e-6)
    assert op.bound == "launch"
    assert dispatch_s(op.op, eager=False) == 0


def test_dropout_is_its_own_kind_with_its_own_host_cost():
    """native_dropout draws its RNG offset and allocates its mask on the host: a dropout op
    costs more to dispatch than an elementwise pass, generated or captured; its backward, a
    masked multiply, is an elementwise pass."""
    from simulator.workload.capture import op_kind
    trace = build_trace(load_workload("bert-base"))
    drops = [o for o in trace.ops if o.name.endswith("dropout")]
    assert drops and {o.kind for o in drops} == {"dropout"}
    assert {o.kind for o in trace.ops if o.name.endswith("dropout.backward")} == {"elementwise"}
    assert dispatch_s(drops[0]) > dispatch_s(dataclasses.replace(drops[0], kind="elementwise"))
    assert op_kind("native_dropout") == "dropout"
    assert op_kind("native_dropout_backward") == "elementwise"


def test_tiny_kernels_leave_the_step_host_bound_and_long_ones_hide_the_host(t4):
    """Streamed, the host issues an op in its issue share of a lone op's dispatch time; the
    last kernel is ready a full dispatch after its call."""
    n = 50
    tiny = replay(_elementwise_chain(n, 64), t4, "sampled")
    per_op = DISPATCH_US["elementwise"] * 1e-6
    issue = per_op * ISSUE_SHARE["elementwise"]
    assert tiny.step_time_s == pytest.approx((n - 1) * issue + per_op, rel=0.05)
    assert tiny.bound == "launch"
    big = replay(_elementwise_chain(n, 1 << 16), t4, "sampled")  # 64 MiB each: ~0.4 ms
    idle = sum(o.launch_s for o in big.ops)
    assert idle < per_op + n * 3e-6  # only the first waits on the host; then the launch gaps


def test_a_result_read_on_the_host_stops_the_host_running_ahead(t4):
    """A long kernel, then tiny ones: the host dispatches the tiny ones while the long one runs,
    unless it waits for the long one's result; then the GPU waits a full dispatch for the first
    tiny kernel and the host's issue time for each after it."""
    n, big = 40, 1 << 16  # the first relu over 64 MiB: about 0.4 ms on the T4
    ahead = replay(_elementwise_chain(n, 64, rows_first=big), t4, "sampled")
    waits = replay(_elementwise_chain(n, 64, rows_first=big, wait_after_first=True), t4,
                   "sampled")
    per_op = DISPATCH_US["elementwise"] * 1e-6
    issue = per_op * ISSUE_SHARE["elementwise"]
    first_end = waits.ops[0].time_s
    assert first_end == pytest.approx(ahead.ops[0].time_s)
    assert waits.step_time_s == pytest.approx(first_end + per_op + (n - 2) * issue + 2e-6,
                                              rel=0.02)
    assert ahead.step_time_s < first_end + n * 3e-6  # the tiny kernels back to back
    assert waits.ops[1].launch_s == pytest.approx(per_op + 2e-6)
    # the what-if timelines (replay/bottleneck.py) tell the same story as the replay
    for est in (ahead, waits):
        busy = [max(o.compute_s, o.memory_s, o.l2_s) for o in est.ops]
        assert timeline_s([o.op for o in est.ops], busy, 2e-6) == pytest.approx(
            est.step_time_s, rel=1e-6)


# --- reports ----------------------------------------------------------------------------------

def test_a_convolutions_dram_transforms_do_not_slow_with_the_sm_clock(t4):
    """A hot T4 runs at 900 of its 1590 MHz: the convolution's arithmetic and kernel time
    stretch by that, its transforms through DRAM (NCHW FP16 on tensor cores: cuDNN's
    transposes) do not."""
    trace = _conv(c_in=64, c_out=64, size=56, dtype="fp16")
    kc = kernel_compute(t4, trace.ops[0], clock_scale=1.0)
    assert len(trace.ops) == 1 and 0 < kc.dram_s < kc.fixed_s < kc.time_s
    held = kernel_compute(t4, trace.ops[0])  # at the sustained clock, as the replay when hot
    assert held.time_s == pytest.approx(kc.dram_s + (kc.time_s - kc.dram_s) / clocks(t4).scale)
    assert held.dram_s == pytest.approx(kc.dram_s)
    est = replay(trace, t4, "sampled")
    on_sms = kc.time_s - kc.dram_s
    hot = kc.dram_s + on_sms / clocks(t4).scale  # (the launch gap lets it cool a little)
    compute_s = est.ops[0].compute_s
    assert hot * 0.95 < compute_s <= hot * (1 + 1e-9)
    assert compute_s < 0.9 * kc.time_s / clocks(t4).scale  # not all of it at 900 MHz
    stretch = (compute_s - kc.dram_s) / on_sms
    assert est.replay.per_op[0].fixed_s == pytest.approx(
        kc.dram_s + (kc.fixed_s - kc.dram_s) * stretch, rel=1e-9)


def test_the_separation_starts_at_the_roofline_and_ends_at_the_replayed_step(t4):
    est = replay(_conv(), t4, "sampled")
    steps = separation(est)
    assert list(steps) == list(SEPARATION)
    assert steps["analytic"] == pytest.approx(est.analytic.step_time_s)
    assert steps["host_and_launch"] == pytest.approx(est.step_time_s)
    assert steps["clocks"] > steps["kernel_efficiency"]  # the T4 at 900 of 1590 MHz


def test_run_reports_the_clocks_and_efficiencies_it_used(t4):
    from simulator.pipeline import analyze
    from simulator.report.json_report import run_doc as to_json
    from simulator.report.text import run_report as render
    r = analyze(str(REPO / "workloads" / "cnn.json"), t4, fidelity="sampled")
    text = render(r)
    assert "SM clock 900 MHz under sustained load of 1590 MHz boost" in text
    assert "library kernels: main loop at" in text and "eager PyTorch dispatch" in text
    doc = to_json(r)
    assert doc["compute_model"]["clocks"]["sustained_MHz"] == 900
    assert doc["compute_model"]["clocks"]["held_MHz"] == 900
    assert doc["compute_model"]["clocks"]["operand_values"] == "random"
    assert set(doc["compute_model"]["library"]["families"]) == set(library.FAMILIES)
    a = analyze(str(REPO / "workloads" / "cnn.json"), t4, fidelity="analytic")
    assert to_json(a)["compute_model"] is None and "SM clock" not in render(a)
    stream = analyze(str(REPO / "workloads" / "stream.json"), t4, fidelity="sampled")
    assert "host: none per op" in render(stream)  # a native program: no eager dispatch
    assert to_json(stream)["compute_model"]["host_dispatch_us_by_op_kind"] == {}
    assert doc["compute_model"]["host_waits_per_step"] == 0 and "results it reads" not in text
    squad = analyze(str(REPO / "workloads" / "bert-large-squad.json"), t4, fidelity="sampled")
    assert to_json(squad)["compute_model"]["host_waits_per_step"] == 2  # overflow, norm
    assert "the host waits for the GPU at 2 results it reads" in render(squad)
    from simulator.config.workload import parse_workload
    raw = json.loads((REPO / "workloads" / "cnn.json").read_text())
    raw["training"]["execution"] = {"operand_values": "zeros"}
    zeros = analyze(parse_workload(raw, "cnn.json"), t4, fidelity="sampled")
    assert "SM clock 1033 MHz under sustained load on zero operands (900 MHz on random ones) " \
           "of 1590 MHz boost (peaks x 0.65" in render(zeros)
    clk = to_json(zeros)["compute_model"]["clocks"]
    assert clk["operand_values"] == "zeros" and clk["held_MHz"] == pytest.approx(900 * 295 / 257)


def test_a_tensor_op_on_a_card_without_tensor_units_falls_back_to_the_cuda_cores(t4):
    rx = load_hardware("rx-6900-xt")
    b = TraceBuilder("k", "fp16")
    w = b.parameter("w", (512, 512), matmul_weight=True)
    L.linear(b, b.tensor("x", (512, 512), Category.INPUT), w, None, "fc")
    op = b.trace().ops[0]
    assert op.unit is Unit.MATRIX
    kc = kernel_compute(rx, op)
    assert library.family_of(kc.ceiling.key) == "simt"
    assert kernel_compute(dataclasses.replace(rx, sustained_clock_mhz=None), op).time_s == \
        pytest.approx(kc.time_s)


def test_nchw_tensor_core_convolutions_pay_for_cudnns_transposes():
    from simulator.gpu.convolution import nchw_transpose_bytes
    nchw = _conv(c_in=64, c_out=64, size=56, dtype="fp16").ops[0]
    b = TraceBuilder("kernel", "fp16", Execution(channels_last=True))
    w = b.parameter("conv.weight", (64, 64, 3, 3), matmul_weight=True)
    L.conv2d(b, b.tensor("x", (16, 64, 56, 56), Category.INPUT), w, None, 1, 1, "conv")
    nhwc = b.trace().ops[0]
    assert (nchw.layout, nhwc.layout) == ("nchw", "nhwc")
    activations = nchw.reads[0].nbytes + nchw.writes[0].nbytes
    assert nchw_transpose_bytes(nchw) == 2 * activations and nchw_transpose_bytes(nhwc) == 0
    a6000 = load_hardware("rtx-a6000")
    assert kernel_compute(a6000, nchw).time_s > kernel_compute(a6000, nhwc).time_s


def test_batch_norm_reads_its_activations_twice_from_dram_unless_the_l2_holds_them():
    from simulator.gpu.l2 import L2Cache

    def bn(size):
        b = TraceBuilder("bn", "fp32")
        x = b.tensor("x", (8, 64, size, size), Category.INPUT)
        w, bias = b.parameter("bn.weight", (64,)), b.parameter("bn.bias", (64,))
        L.batch_norm2d(b, x, w, bias, [], "bn")
        return b.trace().ops[0], x.nbytes

    small, small_bytes = bn(8)      # 128 KiB: the second pass hits the L2
    large, large_bytes = bn(128)    # 32 MiB: it streams through twice
    cache = 4 << 20
    assert L2Cache(cache).filter(small).dram_read_bytes < 1.1 * small_bytes
    assert L2Cache(cache).filter(large).dram_read_bytes >= 2 * large_bytes


def test_a_trace_file_keeps_layouts_and_how_kernels_are_launched(tmp_path):
    from simulator.workload import tracefile
    trace = _conv()
    graph = _elementwise_chain(2, 64, Execution(cuda_graphs=True, operand_values="zeros"))
    for t, eager, values in ((trace, True, "random"), (graph, False, "zeros")):
        path = tmp_path / f"{t.workload}.jsonl"
        tracefile.write(t, path)
        back, _ = tracefile.read(path)
        assert back.eager is eager and [o.layout for o in back.ops] == [o.layout for o in t.ops]
        assert back.operand_values == values


def test_layer_norm_reads_x_twice_where_pytorch_cannot_vectorize_its_rows():
    """Rows a multiple of 4 elements take PyTorch's one-pass kernel; others two kernels that
    each read x. The backward's two kernels both read grad(y) and x."""
    def ln_forward(cols):
        b = TraceBuilder("ln", "fp32")
        x = b.tensor("x", (64, cols), Category.INPUT)
        w, bias = b.parameter("ln.weight", (cols,)), b.parameter("ln.bias", (cols,))
        L.layer_norm(b, x, w, bias, "ln")
        return b.trace().ops[0]

    assert [a.tensor.name for a in ln_forward(1024).reads].count("x") == 1
    assert [a.tensor.name for a in ln_forward(1022).reads].count("x") == 2
    trace = Step(str(REPO / "workloads" / "gpt2-small.json")).trace
    backward = [o for o in trace.ops if o.kind == "norm" and o.name.endswith(".backward")]
    assert backward
    for op in backward:
        ids = [a.tensor.storage.id for a in op.reads]
        assert len(ids) - len(set(ids)) == 2, op.name  # grad(y) and x again


def test_a_refit_of_the_coefficients_changes_the_model_digest():
    """Sweep points are reused only under the same model digest: the fitted coefficients are
    part of the model, so a refit must not leave stale points standing."""
    from simulator.version import digested_files
    assert library.COEFFICIENTS.resolve() in [p.resolve() for p in digested_files()]
