"""The hardware library: every file loads, and its derived figures match the published ones."""

import math

import pytest
from reference_figures import PUBLISHED

from simulator.config.hardware import hardware_names, load_hardware
from simulator.config.timing import BURST_CLOCK_TIMINGS
from simulator.units import GiB, tck_ns

REQUIRED = ["t4", "l4", "a10", "a40", "rtx-a6000", "l40s", "rtx-2080-ti", "titan-rtx", "rtx-3070",
            "rtx-a4000", "rtx-a4500", "rtx-a5000", "rtx-a5500", "rtx-6000-ada", "quadro-rtx-5000",
            "quadro-rtx-6000", "quadro-rtx-8000", "rx-6900-xt", "rx-7900-xtx", "a100-40gb",
            "h100-sxm"]
# H100's published 3352 GB/s comes from a rounded per-pin rate (5.24 Gb/s): allow 0.1 %.
BANDWIDTH_TOLERANCE = 1e-3


def test_library_holds_the_required_devices():
    assert set(REQUIRED) <= set(hardware_names())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_derived_peak_bandwidth_matches_published(name):
    hw = load_hardware(name)
    published, capacity_gb, mem_type = PUBLISHED[name]
    assert hw.memory.peak_bandwidth_GBps == pytest.approx(published, rel=BANDWIDTH_TOLERANCE)
    assert hw.memory.capacity_bytes == capacity_gb * GiB
    assert hw.memory.type == mem_type


@pytest.mark.parametrize("name", [n for n in REQUIRED if PUBLISHED[n][2] == "GDDR6"])
def test_gddr6_organization_and_clocks(name):
    m = load_hardware(name).memory
    assert m.channels == m.bus_width_bits // 16
    assert m.devices == m.channels // 2 * (2 if m.clamshell else 1)
    assert m.ck_GHz == pytest.approx(m.data_rate_gbps / 8)
    assert m.wck_GHz == pytest.approx(m.data_rate_gbps / 4)  # QDR
    assert m.timing is not None and not m.timing.problems()


def test_hbm_devices_carry_no_gddr6_timing():
    for name in ("a100-40gb", "h100-sxm"):
        m = load_hardware(name).memory
        assert m.timing is None and m.ck_GHz is None


def test_ridge_points_are_peak_over_bandwidth():
    hw = load_hardware("t4")
    ridge = hw.ridge_points()
    assert ridge["fp32"] == pytest.approx(8.14e12 / 320e9)
    assert ridge["fp16_tensor"] == pytest.approx(65e12 / 320e9)
    assert "bf16_tensor" not in ridge  # Turing has no BF16 tensor cores


def test_timing_keeps_nanoseconds_across_data_rates():
    """At 10 Gb/s (T4) each analog timing covers at least its 14 Gb/s nanoseconds."""
    t4 = load_hardware("t4").memory.timing
    ref = load_hardware("rtx-2080-ti").memory.timing  # 14 Gb/s: the reference grade itself
    for name, n_ref in ref.as_dict().items():
        n = getattr(t4, name)
        if name in BURST_CLOCK_TIMINGS:
            assert n == n_ref
        else:
            assert n * tck_ns(10.0) >= n_ref * tck_ns(14.0) - 1e-9
            assert (n - 1) * tck_ns(10.0) < n_ref * tck_ns(14.0) or name == "nRC"


def test_timing_at_reference_rate_is_the_datasheet_set():
    t = load_hardware("titan-rtx").memory.timing
    got = (t.nCL, t.nRCDRD, t.nRP, t.nRAS, t.nRC, t.nFAW, t.nREFI)
    assert got == (24, 30, 30, 60, 90, 43, 3333)


def test_derived_channel_rate_units():
    """One 16-bit GDDR6 channel at 14 Gb/s moves 28 GB/s; a BL16 burst is 32 B in 2 CK."""
    m = load_hardware("rtx-3070").memory
    per_channel = m.peak_bandwidth_GBps / m.channels
    assert per_channel == pytest.approx(28.0)
    burst_bytes = m.channel_width_bits * 16 // 8
    assert burst_bytes == 32
    assert burst_bytes / (m.timing.nBL / m.ck_GHz) == pytest.approx(per_channel)
    assert math.isclose(1 / m.ck_GHz, tck_ns(14.0))


def test_the_config_layer_imports_no_simulation_package(repo):
    """config/ is the ground floor: loading and validating files imports only config,
    errors, units and resources (dram, gpu, workload, replay build on it, never the reverse)."""
    import ast

    allowed = ("simulator.config", "simulator.errors", "simulator.units", "simulator.resources")
    for path in (repo / "simulator" / "config").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name.startswith("simulator"):
                    assert name.startswith(allowed), f"{path.name} imports {name}"


def test_lists_of_names_are_the_schemas():
    """Model types and peak keys are defined once, and the schemas list the same."""
    from simulator.config.hardware import PEAK_KEYS
    from simulator.config.loader import schema
    from simulator.config.models import MODEL_TYPES

    peaks = schema("hardware")["properties"]["compute"]["properties"]["peak_tflops"]
    assert tuple(peaks["properties"]) == PEAK_KEYS
    assert tuple(schema("workload")["properties"]["model"]["properties"]["type"]["enum"]) \
        == MODEL_TYPES


def test_the_rx_7900_xtx_fp32_ceiling_is_the_rate_compiled_kernels_issue():
    """RDNA 3's 61.4 TFLOP/s counts dual issue (VOPD), which compilers rarely pair: the
    ceiling is the single-issue rate, 96 CUs x 64 lanes x 2 FLOP x 2.5 GHz."""
    hw = load_hardware("rx-7900-xtx")
    assert hw.peak_tflops["fp32"] == pytest.approx(96 * 64 * 2 * 2.5e9 / 1e12)
    assert hw.peak_tflops["fp16_vector"] == pytest.approx(2 * hw.peak_tflops["fp32"], 1e-3)
    assert any("dual issue" in s and "Chips and Cheese" in s for s in hw.sources)


def test_a_timing_preset_with_overrides_is_the_full_set_it_stands_for(write_json, repo):
    """GDDR6 cards name one timing preset; a file may override any of its cycles, and a
    format-1 file that writes the whole set out (and the derived devices and channels per
    device) loads to the same card."""
    import json

    doc = json.loads((repo / "hardware" / "t4.json").read_text())
    preset = json.loads((repo / "hardware" / "timing" / "samsung-k4z80325bc-14gbps.json")
                        .read_text())
    assert doc["memory"]["timing"] == {"preset": preset["name"]}
    full = {**doc, "name": "full"}
    full["memory"] = {**doc["memory"], "channel_width_bits": 16, "channels_per_device": 2,
                      "devices": 8, "timing": {k: preset[k] for k in (
                          "source", "reference_data_rate_gbps", "cycles_ck")}}
    t4, stated = load_hardware("t4"), load_hardware(write_json(full, "full.json"))
    assert stated.memory == t4.memory
    over = {**doc, "name": "over"}
    over["memory"] = {**doc["memory"], "timing": {"preset": preset["name"],
                                                  "cycles_ck": {"nCL": 30}}}
    changed = load_hardware(write_json(over, "over.json"))
    assert changed.memory.timing.nCL > t4.memory.timing.nCL
    assert changed.memory.timing.nRC == t4.memory.timing.nRC
    assert "overridden here: nCL 30" in changed.memory.timing_source


def test_every_gddr6_card_states_each_fact_once(repo):
    """No shipped GDDR6 file repeats the timing block or the fields its bus determines."""
    import json

    for path in (repo / "hardware").glob("*.json"):
        m = json.loads(path.read_text())["memory"]
        if m["type"].startswith("GDDR"):
            assert set(m["timing"]) == {"preset"}, path.name
            assert not {"devices", "channels_per_device", "channel_width_bits"} & set(m)


def test_inline_ecc_carves_a_sixteenth_out_of_the_usable_capacity():
    """Data-center GDDR6 cards run inline ECC by default: a T4 shows 15 of its 16 GB."""
    t4 = load_hardware("t4")
    assert t4.memory.ecc == "inline"
    assert t4.memory.ecc_reserved_bytes == t4.memory.capacity_bytes // 16
    assert t4.usable_bytes == (t4.memory.capacity_bytes - t4.memory.ecc_reserved_bytes -
                               t4.runtime_reserve.total_bytes)
    a6000 = load_hardware("rtx-a6000")  # a workstation card: ECC off by default
    assert a6000.memory.ecc == "off" and a6000.memory.ecc_reserved_bytes == 0


@pytest.mark.parametrize("card,mib", [("t4", 15360), ("a10", 23028), ("l4", 23034),
                                      ("l40s", 46068)])
def test_capacity_less_ecc_is_what_nvidia_smi_reports(card, mib):
    """nvidia-smi's memory totals with ECC on by default (github.com/modal-labs/modal-client
    pull 2797): within 0.1 % (the driver keeps a few MiB more)."""
    m = load_hardware(card).memory
    assert (m.capacity_bytes - m.ecc_reserved_bytes) / 2**20 == pytest.approx(mib, rel=1e-3)


@pytest.mark.parametrize("name", [n for n in hardware_names()
                                  if load_hardware(n).boost_clock_mhz is not None])
def test_the_fp32_peak_over_the_fp32_lanes_gives_the_stated_boost_clock(name):
    """rated_boost_mhz reads a card's boost clock off its FP32 peak where the file states none:
    on every file that states one, the lanes per SM give that clock back."""
    import dataclasses

    from simulator.gpu.clocks import rated_boost_mhz

    hw = load_hardware(name)
    derived = rated_boost_mhz(dataclasses.replace(hw, boost_clock_mhz=None))
    assert derived == pytest.approx(hw.boost_clock_mhz, rel=2e-3)
