"""What the plots draw agrees with what the reports state (not only that the files decode)."""

import numpy as np
import pytest
from conftest import REPO, load_doc

from simulator.pipeline import analyze
from simulator.report.plots import bandwidth_over_time, memory_timeline, roofline
from simulator.units import GiB, MiB


def _stack_top(ax) -> float:
    """The highest point of the stacked areas."""
    return max(c.get_paths()[0].vertices[:, 1].max() for c in ax.collections)


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_memory_plot_reaches_the_stated_peak():
    """The CNN's peak (15.2 MiB) is while relu1.backward runs, on outputs it holds then: the
    plot shows what is live during each op, so its top is the peak, in MiB, not a sliver
    under a 16 GiB line."""
    r = analyze("cnn", "t4", fidelity="analytic")
    peak = r.memory.peak_bytes
    assert peak > r.memory.live_after.sum(axis=1).max()  # (after each op would miss it)
    ax = memory_timeline(r).axes[0]
    assert ax.get_ylabel() == "live (MiB)"
    assert _stack_top(ax) == pytest.approx(peak / MiB)
    assert peak / MiB <= ax.get_ylim()[1] < 2 * peak / MiB
    marker = ax.lines[0]
    assert marker.get_ydata()[0] == pytest.approx(peak / MiB)
    assert "peak, at relu1.backward" in _legend(ax)
    assert "usable 14.58 GiB,\noff scale" in _legend(ax)  # 16 GiB is not drawn to scale
    assert "peak 15.21 MiB, 0.1 % of 14.58 GiB usable" in ax.get_title()
    # the caching allocator's reserve, what an out-of-memory error checks, drawn above it
    reserve = [line for line in ax.lines if line.get_label().startswith("allocator reserve")]
    assert len(reserve) == 1
    assert reserve[0].get_ydata()[0] == pytest.approx(r.placement.reserved_peak / MiB)
    assert r.placement.reserved_peak / MiB < ax.get_ylim()[1]
    # every category that holds bytes is named, and no empty one (the CNN has no buffers)
    assert "buffers" not in _legend(ax) and "activations" in _legend(ax)
    # the x axis is the step, in the unit the step reads in
    assert ax.get_xlabel() == "time in the step (us)"
    assert ax.get_xlim()[1] == pytest.approx(r.estimate.step_time_s * 1e6)


def test_memory_plot_draws_a_capacity_it_passes(write_json):
    """GPT-2 small at batch 8 on the 8 GiB RTX 3070: over capacity, drawn to scale."""
    doc = load_doc(REPO / "workloads" / "gpt2-small.json")
    doc["data"]["batch_size"] = 8
    r = analyze(write_json(doc), "rtx-3070", fidelity="analytic")
    assert not r.fits
    ax = memory_timeline(r).axes[0]
    assert ax.get_ylabel() == "live (GiB)"
    assert _stack_top(ax) == pytest.approx(r.memory.peak_bytes / GiB)
    capacity = [line for line in ax.lines if line.get_label().startswith("usable 7.58 GiB")]
    assert len(capacity) == 1 and capacity[0].get_ydata()[0] == pytest.approx(7.575, abs=0.01)
    assert "DOES NOT FIT in 7.58 GiB usable" in ax.get_title()
    assert ax.get_xlabel() == "time in the step (ms)"


def test_bandwidth_plot_takes_the_steps_unit():
    r = analyze("cnn", "t4", fidelity="analytic")
    ax = bandwidth_over_time(r).axes[0]
    assert ax.get_xlabel() == "time in the step (us)"
    assert ax.get_xlim()[1] == pytest.approx(r.estimate.step_time_s * 1e6)
    tops = [c.get_paths()[0].vertices[:, 1].max() for c in ax.collections]
    drawn = [o for o in r.estimate.ops if o.time_s > 0]
    assert np.allclose(tops, [o.bytes_to_dram / o.time_s / 1e9 for o in drawn])


def test_roofline_draws_the_dram_ceiling_the_replay_sustained():
    r = analyze("cnn", "t4", fidelity="sampled")
    busy = r.estimate.replay.bottlenecks.dram_busy_share
    assert 0.5 < busy < 1
    ax = roofline(r).axes[0]
    lines = {line.get_label(): line for line in ax.lines}
    peak = lines["DRAM 320 GB/s"]
    sustained = [line for label, line in lines.items() if label.startswith("DRAM sustained")]
    assert len(sustained) == 1
    label = " ".join(sustained[0].get_label().split())  # (wrapped to keep the legend narrow)
    assert f"data bus busy {busy * 100:.1f} % in DRAM-bound ops, 20 % of it inline ECC's " \
        "check bits" in label
    # below the compute ceilings, the sustained line is the peak one scaled by the busy share
    # less the check bits' (the T4 runs inline ECC: a burst in five)
    x, y = sustained[0].get_data()
    x_peak, y_peak = peak.get_data()
    assert y[0] / x[0] == pytest.approx(busy * 0.8 * y_peak[0] / x_peak[0])
    # the analytic roofline has no replay, so no sustained ceiling
    plain = roofline(analyze("cnn", "t4", fidelity="analytic")).axes[0]
    assert not any(line.get_label().startswith("DRAM sustained") for line in plain.lines)


def test_the_int8_ceiling_is_labelled_in_operations_not_flops():
    """int8 math counts operations: its ceiling and the axis say OP/s, not FLOP/s."""
    from simulator.pipeline import analyze
    from simulator.report.plots import roofline

    ax = roofline(analyze("cnn", "l4", fidelity="analytic")).axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert any("int8_tensor 242 TOP/s" in t and "OP/B" in t for t in labels)
    assert not any("int8_tensor 242 TFLOP/s" in t for t in labels)
    assert "OP/s" in ax.get_ylabel()
