"""Hardware descriptions: what the file states, and the figures derived from it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from simulator import resources, units
from simulator.config import controller as controllers
from simulator.config.address_mapping import AddressMapping
from simulator.config.controller import ControllerConfig
from simulator.config.loader import content_digest, load, schema
from simulator.config.organization import (
    BURST_CK,
    BURST_LENGTH,
    CHANNEL_WIDTH_BITS,
    CHANNELS_PER_DEVICE,
    organization,
)
from simulator.config.runtime import RuntimeReserve, runtime_reserve
from simulator.config.timing import GDDR6Timing, check, refresh_problem
from simulator.errors import InputError
from simulator.units import BITS_PER_PIN_PER_CK

GDDR_TYPES = ("GDDR6", "GDDR6X")
# integer math counts operations, not floating-point ones: its peak is in 1e12 OP/s
INTEGER_PEAKS = frozenset({"int8_tensor"})
# inline ECC: bytes of data per 32 B sector of check bits (2 B per 32 B sector: SECDED)
ECC_DATA_PER_CHECK_SECTOR = 16


def peak_unit(key: str) -> tuple[str, str]:
    """A peak's unit and its ridge point's: ('TFLOP/s', 'FLOP/B'), or for integer math
    ('TOP/s', 'OP/B')."""
    return ("TOP/s", "OP/B") if key in INTEGER_PEAKS else ("TFLOP/s", "FLOP/B")


PEAK_KEYS = ("fp64", "fp32", "fp16_vector", "tf32_tensor", "fp16_tensor", "bf16_tensor",
             "fp8_tensor", "int8_tensor")


@dataclass(frozen=True)
class MemorySpec:
    type: str
    data_rate_gbps: float        # per pin
    bus_width_bits: int
    channel_width_bits: int
    channels_per_device: int
    devices: int
    clamshell: bool
    device_density_gbit: float
    wck_mode: str | None
    timing: GDDR6Timing | None   # at this data rate, in CK cycles
    timing_source: str | None
    ecc: str = "off"             # off | inline (check bits kept in the DRAM: ecc_reserved_bytes,
    #                              moved with every line: replay/traffic.py)

    @property
    def is_gddr(self) -> bool:
        return self.type in GDDR_TYPES

    @property
    def replayable(self) -> bool:
        """Can the GDDR6 engine replay it (`sampled`, `cycle`)? Else the analytic roofline."""
        return self.is_gddr and self.timing is not None

    @property
    def channels(self) -> int:
        return self.bus_width_bits // self.channel_width_bits

    @property
    def capacity_bytes(self) -> int:
        return self.devices * units.gbit_to_bytes(self.device_density_gbit)

    @property
    def ecc_reserved_bytes(self) -> int:
        """Inline ECC's carve-out: one 32 B sector of check bits per 512 B of data, a sixteenth
        of the DRAM (NVIDIA Tesla V100 whitepaper, 2017: GDDR5's inline ECC reserves 6.25 %;
        a T4, 16 GB, shows 15 GB with ECC on: exafunction.com/blog/ecc-gpu)."""
        return self.capacity_bytes // ECC_DATA_PER_CHECK_SECTOR if self.ecc == "inline" else 0

    @property
    def peak_bandwidth_GBps(self) -> float:
        return units.peak_bandwidth_GBps(self.bus_width_bits, self.data_rate_gbps)

    @property
    def ck_GHz(self) -> float | None:
        return units.ck_frequency_GHz(self.data_rate_gbps) if self.is_gddr else None

    @property
    def wck_GHz(self) -> float | None:
        if not self.is_gddr:
            return None
        return units.wck_frequency_GHz(self.data_rate_gbps, self.wck_mode or "QDR")


@dataclass(frozen=True)
class Hardware:
    name: str
    display_name: str
    vendor: str
    chip: str
    memory: MemorySpec
    l2_bytes: int
    last_level_cache_bytes: int
    peak_tflops: dict[str, float | None]
    sm_count: int | None
    tdp_w: float | None
    price_usd: float | None
    sources: tuple[str, ...]
    path: str
    # the controller every path runs the card on, decided as the file loads (config.controller)
    controller: ControllerConfig = controllers.GPU_CONTROLLER
    controller_source: str = controllers.GPU_CONTROLLER_SOURCE
    energy_pj_per_bit: float | None = None
    l2_bandwidth_GBps: float | None = None      # measured; None: the replay estimates it
    kernel_launch_overhead_us: float | None = None  # None: the compute model's default
    # SM clocks, MHz: the rated boost the peaks are counted at, and the one held under load;
    # None when the file states none (the replay then runs at the boost clock)
    boost_clock_mhz: float | None = None
    sustained_clock_mhz: float | None = None
    # SHA-256 of the description as loaded (after any sweep setting): what a stored result
    # of this card was computed from
    content_digest: str = ""
    # what the driver's context and the libraries' workspaces hold (config.runtime)
    runtime_reserve: RuntimeReserve = runtime_reserve("NVIDIA", "")

    @property
    def usable_bytes(self) -> int:
        """The capacity less inline ECC's carve-out and the runtime's reserve: what every fit
        verdict is held to."""
        return (self.memory.capacity_bytes - self.memory.ecc_reserved_bytes -
                self.runtime_reserve.total_bytes)

    @property
    def peak_bandwidth_Bps(self) -> float:
        return self.memory.peak_bandwidth_GBps * units.GB

    def ridge_points(self) -> dict[str, float]:
        """FLOP per DRAM byte where each compute ceiling meets the bandwidth ceiling."""
        return {key: value * units.TERA / self.peak_bandwidth_Bps
                for key, value in self.peak_tflops.items() if value}


def devices_for_bus(bus_width_bits: int, channel_width_bits: int, channels_per_device: int,
                    clamshell: bool) -> int:
    """Devices that fill the bus: one per `channels_per_device` channels, two in clamshell."""
    channels = bus_width_bits // channel_width_bits
    return channels // channels_per_device * (2 if clamshell else 1)


def _organization_fields(m: dict, file: str) -> tuple[int, int]:
    """(channel_width_bits, channels_per_device): as stated, or GDDR's own (16, 2)."""
    gddr = m["type"] in GDDR_TYPES
    for key in ("channel_width_bits", "channels_per_device"):
        if key not in m and not gddr:
            raise InputError(f"'{key}' is required for {m['type']} memory (it is derived for "
                             "GDDR6 only)", file=file, path="$.memory")
    return (m.get("channel_width_bits", CHANNEL_WIDTH_BITS),
            m.get("channels_per_device", CHANNELS_PER_DEVICE))


def _timing_set(m: dict, file: str) -> tuple[dict[str, int], float, str]:
    """(cycles_ck, reference_data_rate_gbps, source) of the file's timing: its own full set,
    or a preset with what the file overrides."""
    t = m["timing"]
    if "preset" not in t:
        return t["cycles_ck"], t["reference_data_rate_gbps"], t["source"]
    try:
        path = resources.timing_preset(t["preset"], Path(file).parent)
    except InputError as exc:
        raise exc.in_file(file) from None
    preset = load(path, "hardware", part="timing_preset")
    if Path(path).stem != preset["name"]:
        raise InputError(_name_expected(Path(path).stem, preset["name"]), file=str(path),
                         path="$.name")
    own = t.get("cycles_ck", {})
    source = t.get("source", preset["source"])
    if own:
        source += f" (overridden here: {', '.join(f'{k} {v}' for k, v in own.items())})"
    return ({**preset["cycles_ck"], **own},
            t.get("reference_data_rate_gbps", preset["reference_data_rate_gbps"]), source)


def _memory(raw: dict, file: str) -> MemorySpec:
    m = raw["memory"]
    bus = m["bus_width_bits"]
    chw, per_dev = _organization_fields(m, file)
    if bus % chw:
        raise InputError(f"expected a multiple of channel_width_bits ({chw}), got {bus}",
                         file=file, path="$.memory.bus_width_bits")
    channels = bus // chw
    if channels % per_dev:
        raise InputError(f"expected a bus of whole devices ({per_dev} channels x {chw} bit "
                         f"each), got {bus} bits", file=file, path="$.memory.bus_width_bits")
    want_devices = devices_for_bus(bus, chw, per_dev, m["clamshell"])
    if m.get("devices", want_devices) != want_devices:
        how = "in x8 clamshell, two devices per channel pair" if m["clamshell"] else "x16 mode"
        raise InputError(
            f"expected {want_devices} devices for a {bus}-bit bus of {per_dev} x {chw}-bit "
            f"channels per device ({how}), got {m['devices']}",
            file=file, path="$.memory.devices")
    timing = None
    source = None
    if m["type"] in GDDR_TYPES:
        if chw != CHANNEL_WIDTH_BITS or per_dev != CHANNELS_PER_DEVICE:
            raise InputError(f"expected GDDR6 organization: channel_width_bits "
                             f"{CHANNEL_WIDTH_BITS} and channels_per_device "
                             f"{CHANNELS_PER_DEVICE}", file=file,
                             path="$.memory")
        if "timing" not in m:
            raise InputError("'timing' is required for GDDR memory (a datasheet timing set)",
                             file=file, path="$.memory")
        cycles, reference_gbps, source = _timing_set(m, file)
        ref = GDDR6Timing.from_cycles(cycles)
        if ref.nBL != BURST_CK:  # else the engine's data bus and the stated peak disagree
            raise InputError(
                f"expected {BURST_CK}: a BL{BURST_LENGTH} burst moves "
                f"{BITS_PER_PIN_PER_CK} bits per pin per CK, so it holds the data bus "
                f"{BURST_CK} CK (data_rate_gbps sets the bandwidth), got {ref.nBL}",
                file=file, path="$.memory.timing.cycles_ck.nBL")
        check(ref, file, "$.memory.timing.cycles_ck")
        timing = ref.at_data_rate(reference_gbps, m["data_rate_gbps"])
        problems = timing.problems()
        if problems:  # the set holds at its own data rate, so the rate is what breaks it
            _broken_at_rate("impossible timing set", problems[0][1], reference_gbps, file)
    elif "timing" in m or "wck_mode" in m:
        key = "timing" if "timing" in m else "wck_mode"
        raise InputError(f"'{key}' applies to GDDR memory only, got type {m['type']}",
                         file=file, path=f"$.memory.{key}")
    return MemorySpec(m["type"], float(m["data_rate_gbps"]), bus, chw, per_dev, want_devices,
                      m["clamshell"], float(m["device_density_gbit"]), m.get("wck_mode"),
                      timing, source, m.get("ecc", "off"))


def parse_hardware(raw: dict, file: str) -> Hardware:
    """Build a Hardware from already schema-checked data."""
    stem = Path(file).stem
    if stem != raw["name"] and Path(file).suffix == ".json":
        raise InputError(_name_expected(stem, raw["name"]), file=file, path="$.name")
    compute = raw.get("compute", {"peak_tflops": {}})
    peaks = {k: compute["peak_tflops"].get(k) for k in PEAK_KEYS}
    memory = _memory(raw, file)
    ctl, ctl_source = _controller(raw, memory, file)
    hw = Hardware(
        name=raw["name"], display_name=raw["display_name"], vendor=raw["vendor"],
        chip=raw.get("chip", ""), memory=memory,
        l2_bytes=raw.get("cache", {}).get("l2_bytes", 0),
        last_level_cache_bytes=raw.get("cache", {}).get("last_level_cache_bytes", 0),
        peak_tflops=peaks, sm_count=compute.get("sm_count"), tdp_w=raw.get("tdp_w"),
        price_usd=raw.get("price_usd"), sources=tuple(raw["sources"]), path=file,
        controller=ctl, controller_source=ctl_source,
        energy_pj_per_bit=raw["memory"].get("energy_pj_per_bit"),
        l2_bandwidth_GBps=raw.get("cache", {}).get("l2_bandwidth_GBps"),
        kernel_launch_overhead_us=compute.get("kernel_launch_overhead_us"),
        boost_clock_mhz=compute.get("clocks_mhz", {}).get("boost"),
        sustained_clock_mhz=compute.get("clocks_mhz", {}).get("sustained"),
        content_digest=content_digest(raw),
        runtime_reserve=runtime_reserve(raw["vendor"], raw.get("chip", "")))
    _check_refresh(hw, raw, file)
    return hw


def _name_expected(stem: str, name: str) -> str:
    """Both rules at once: the name equals the file name, and is lower case with dashes."""
    pattern = schema("hardware")["properties"]["name"]["pattern"]
    if re.fullmatch(pattern, stem):
        return f"expected the name to equal the file name '{stem}', got '{name}'"
    slug = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-") or "my-card"
    return (f"expected the name to equal the file name, lower case with dashes ({pattern}); "
            f"the file name '{stem}' is not: rename the file to '{slug}.json' and set the "
            f"name to '{slug}', got '{name}'")


def _check_refresh(hw: Hardware, raw: dict, file: str) -> None:
    """Per-bank refresh must leave the channel command slots (else the engine serves refreshes
    only); checked on the controller the replay runs the card on."""
    if hw.memory.timing is None:
        return
    per_bank = hw.controller.refresh == "per_bank"
    banks = organization(hw.memory, file).banks
    text = refresh_problem(hw.memory.timing, per_bank, banks)
    if text is None:
        return
    cycles, reference_gbps, _ = _timing_set(raw["memory"], file)
    as_stated = refresh_problem(GDDR6Timing.from_cycles(cycles), per_bank, banks)
    if as_stated is not None:
        raise InputError(f"expected {as_stated}", file=file,
                         path="$.memory.timing.cycles_ck.nREFI")
    _broken_at_rate("per-bank refresh impossible", text, reference_gbps, file)


def _broken_at_rate(what: str, expected: str, reference_gbps: float, file: str) -> None:
    """A timing set that holds as stated, broken by the rescaling to the card's data rate:
    the data rate is named, not the stated cycles."""
    raise InputError(f"{what} at this data rate: expected {expected} (the set given at "
                     f"{reference_gbps:g} Gb/s, its analog timings kept "
                     f"in ns, rounded up to this rate's CK)", file=file,
                     path="$.memory.data_rate_gbps")


def _address_mapping(raw: dict, memory: MemorySpec, file: str) -> AddressMapping | None:
    m = raw["memory"].get("address_mapping")
    if m is None:
        return None
    path = "$.memory.address_mapping"
    try:
        mapping = AddressMapping(
            fields=tuple(m["fields"]),
            hash=tuple((h["target"], h["source"]) for h in m.get("hash", [])),
            source=m["source"])
        if memory.type in GDDR_TYPES:  # the parts must divide the organisation's counts
            mapping.check(organization(memory, file))
    except ValueError as e:
        raise InputError(str(e), file=file, path=f"{path}.fields") from None
    return mapping


def _controller(raw: dict, memory: MemorySpec, file: str) -> tuple[ControllerConfig, str]:
    """The card's effective controller and where it comes from (config.controller.effective)."""
    stated = raw["memory"].get("controller")
    try:
        return controllers.effective(stated, _address_mapping(raw, memory, file))
    except controllers.SettingError as exc:
        raise InputError(exc.expected, file=file,
                         path=f"$.memory.controller.{exc.setting}") from None


def hardware_names() -> list[str]:
    return resources.shipped_names(resources.hardware_dir())


def load_hardware(spec: str | Path) -> Hardware:
    """A card by shipped name (`hardware list`) or path, checked against its schema and the
    rules no schema states (organisation, timing, refresh); InputError names what is wrong."""
    path = resources.resolve("hardware", str(spec))
    raw = load(path, "hardware")
    return parse_hardware(raw, str(path))
