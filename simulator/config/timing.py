"""GDDR6 timing parameters, all in CK cycles (CK = data rate / 8).

A datasheet gives a timing set for one speed grade. At another data rate the analog timings
(row activation, precharge, refresh, write recovery, latencies) keep their nanoseconds and are
re-rounded up to whole CK cycles; the burst-clock timings (burst length, CAS-to-CAS, PRE-to-PRE)
keep their cycle counts, since they are set by the interface, not by the cells.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from simulator.errors import InputError
from simulator.units import tck_ns

# Timings counted on the interface clock: they do not stretch with the cell array's nanoseconds.
BURST_CLOCK_TIMINGS = frozenset({"nBL", "nCCDS", "nCCDL", "nPPD"})


@dataclass(frozen=True)
class GDDR6Timing:
    """One timing set, every field in CK cycles."""

    nBL: int      # burst: a BL16 burst occupies the data bus for nBL CK (2)
    nCL: int      # read latency: RD command to first data
    nCWL: int     # write latency: WR command to first data
    nRCDRD: int   # ACT to RD, same bank
    nRCDWR: int   # ACT to WR, same bank
    nRP: int      # PRE to ACT, same bank
    nRAS: int     # ACT to PRE, same bank
    nRC: int      # ACT to ACT, same bank
    nWR: int      # write recovery: end of write data to PRE
    nRTP: int     # RD to PRE
    nCCDS: int    # column to column, different bank group
    nCCDL: int    # column to column, same bank group
    nRRDS: int    # ACT to ACT, different bank group
    nRRDL: int    # ACT to ACT, same bank group
    nWTRS: int    # end of write data to RD, different bank group
    nWTRL: int    # end of write data to RD, same bank group
    nFAW: int     # window holding at most four ACTs
    nRFCab: int   # all-bank refresh cycle time
    nRFCpb: int   # per-bank refresh cycle time
    nRREFD: int   # REFpb to REFpb or ACT, different bank
    nREFI: int    # average refresh interval (all-bank)
    nPPD: int     # PRE to PRE

    @classmethod
    def from_cycles(cls, cycles: dict[str, int]) -> GDDR6Timing:
        return cls(**{f.name: int(cycles[f.name]) for f in fields(cls)})

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def at_data_rate(self, reference_gbps: float, data_rate_gbps: float) -> GDDR6Timing:
        """The same device run at another per-pin data rate (see module docstring)."""
        if math.isclose(reference_gbps, data_rate_gbps):
            return self
        ratio = tck_ns(reference_gbps) / tck_ns(data_rate_gbps)
        scaled = {
            name: value if name in BURST_CLOCK_TIMINGS else max(1, math.ceil(value * ratio - 1e-9))
            for name, value in self.as_dict().items()
        }
        # rounding each up on its own can leave nRC one short of nRAS + nRP; a controller
        # programs the row cycle to cover both
        scaled["nRC"] = max(scaled["nRC"], scaled["nRAS"] + scaled["nRP"])
        return replace(self, **scaled)

    def problems(self) -> list[tuple[str, str]]:
        """Relations a physical device must satisfy, as (field, what was expected) pairs."""
        t = self
        out: list[tuple[str, str]] = []

        def need(ok: bool, field: str, text: str) -> None:
            if not ok:
                out.append((field, text))

        need(t.nRC >= t.nRAS + t.nRP, "nRC",
             f"nRC >= nRAS + nRP ({t.nRAS} + {t.nRP} = {t.nRAS + t.nRP}), got {t.nRC}")
        need(t.nRAS >= t.nRCDRD, "nRAS", f"nRAS >= nRCDRD ({t.nRCDRD}), got {t.nRAS}")
        need(t.nCCDL >= t.nCCDS, "nCCDL", f"nCCDL >= nCCDS ({t.nCCDS}), got {t.nCCDL}")
        need(t.nCCDS >= t.nBL, "nCCDS", f"nCCDS >= nBL ({t.nBL}): bursts cannot overlap on the "
             f"data bus, got {t.nCCDS}")
        need(t.nRRDL >= t.nRRDS, "nRRDL", f"nRRDL >= nRRDS ({t.nRRDS}), got {t.nRRDL}")
        need(t.nWTRL >= t.nWTRS, "nWTRL", f"nWTRL >= nWTRS ({t.nWTRS}), got {t.nWTRL}")
        need(t.nFAW >= t.nRRDS, "nFAW", f"nFAW >= nRRDS ({t.nRRDS}), got {t.nFAW}")
        need(t.nRFCab >= t.nRFCpb, "nRFCab", f"nRFCab >= nRFCpb ({t.nRFCpb}), got {t.nRFCab}")
        need(t.nREFI > t.nRFCab, "nREFI",
             f"nREFI > nRFCab ({t.nRFCab}): refresh would never end, got {t.nREFI}")
        return out


def refresh_interval_ck(t: GDDR6Timing, per_bank: bool, banks: int) -> int:
    """CK cycles between a channel's refresh commands: REFab every nREFI, or REFpb to each bank
    in turn, `banks` of them per nREFI. A controller counts whole cycles and rounds down, so
    that it never refreshes less often than the device needs."""
    return t.nREFI // banks if per_bank else t.nREFI


def refresh_problem(t: GDDR6Timing, per_bank: bool, banks: int) -> str | None:
    """Per-bank refresh that cannot leave a command slot for reads and writes (a timing set
    rescaled to a very low data rate, where every timing rounds up to 1 CK): what was
    expected, or None. All-bank refresh has its own relation (nREFI > nRFCab)."""
    if not per_bank:
        return None
    every = refresh_interval_ck(t, per_bank, banks)
    spacing = max(1, t.nRREFD, -(-t.nFAW // 4))  # REFpb to REFpb, by nRREFD and nFAW
    if every > spacing:
        return None
    return (f"a per-bank refresh interval (nREFI // {banks} = {every} CK) longer than the "
            f"{spacing} CK that nRREFD and nFAW space REFpb commands: the refreshes would take "
            f"every command slot, got nREFI {t.nREFI}")


def check(timing: GDDR6Timing, file: str, path: str) -> None:
    """Reject an impossible timing set with the first broken relation."""
    problems = timing.problems()
    if problems:
        field, text = problems[0]
        raise InputError(f"impossible timing set: expected {text}", file=file,
                         path=f"{path}.{field}")
