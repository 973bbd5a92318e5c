"""GDDR6 commands and the timing rules between them, in CK cycles, as one table.

The engine applies the table when a command issues (Ramulator-style: each rule raises the
earliest cycle at which a later command may issue at the same channel, bank group or bank).
At most four ACTs (REFpb counts as one) fall in any nFAW window per channel: the engine keeps
that window itself.
The turnarounds follow Ramulator 2.1's GDDR6 model (github.com/CMU-SAFARI/ramulator2):
RD->WR = nCL + 1; WR->RD = nCWL + nBL + nWTRS/L; WR->PRE = nCWL + nBL + nWR; RD->PRE = nRTP.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.config.timing import GDDR6Timing

ACT, PRE, PREA, RD, WR, RDA, WRA, REFAB, REFPB = range(9)
NAMES = ("ACT", "PRE", "PREA", "RD", "WR", "RDA", "WRA", "REFab", "REFpb")
N_COMMANDS = len(NAMES)
CHANNEL, BANKGROUP, BANK = 0, 1, 2
LEVEL_NAMES = ("channel", "bankgroup", "bank")

_READS = (RD, RDA)
_WRITES = (WR, WRA)


@dataclass(frozen=True)
class Rule:
    level: int        # where both commands must meet for the rule to apply
    prev: int
    next: int
    latency: int      # CK cycles from prev to next


def rules(t: GDDR6Timing) -> list[Rule]:
    wr_recovery = t.nCWL + t.nBL + t.nWR
    spec: list[tuple[int, tuple[int, ...], tuple[int, ...], int]] = [
        # data bus and column-to-column
        (CHANNEL, _READS, _READS, max(t.nBL, t.nCCDS)),
        (CHANNEL, _WRITES, _WRITES, max(t.nBL, t.nCCDS)),
        (BANKGROUP, _READS, _READS, t.nCCDL),
        (BANKGROUP, _WRITES, _WRITES, t.nCCDL),
        # read/write turnaround
        (CHANNEL, _READS, _WRITES, t.nCL + 1),
        (CHANNEL, _WRITES, _READS, t.nCWL + t.nBL + t.nWTRS),
        (BANKGROUP, _WRITES, _READS, t.nCWL + t.nBL + t.nWTRL),
        # activation
        (CHANNEL, (ACT,), (ACT,), t.nRRDS),
        (BANKGROUP, (ACT,), (ACT,), t.nRRDL),
        (BANK, (ACT,), (ACT,), t.nRC),
        (BANK, (ACT,), _READS, t.nRCDRD),
        (BANK, (ACT,), _WRITES, t.nRCDWR),
        (BANK, (ACT,), (PRE,), t.nRAS),
        # precharge
        (BANK, (PRE,), (ACT,), t.nRP),
        (BANK, (RD,), (PRE,), t.nRTP),
        (BANK, (WR,), (PRE,), wr_recovery),
        (BANK, (RDA,), (ACT,), t.nRTP + t.nRP),
        (BANK, (WRA,), (ACT,), wr_recovery + t.nRP),
        (CHANNEL, (PRE, PREA), (PRE, PREA), t.nPPD),
        (CHANNEL, (ACT,), (PREA,), t.nRAS),
        (CHANNEL, _READS, (PREA,), t.nRTP),
        (CHANNEL, _WRITES, (PREA,), wr_recovery),
        (CHANNEL, (PREA,), (ACT,), t.nRP),
        # all-bank refresh
        (CHANNEL, (ACT,), (REFAB,), t.nRC),
        (CHANNEL, (PRE, PREA), (REFAB,), t.nRP),
        (CHANNEL, (RDA,), (REFAB,), t.nRTP + t.nRP),
        (CHANNEL, (WRA,), (REFAB,), wr_recovery + t.nRP),
        (CHANNEL, (REFAB,), (ACT, REFAB, REFPB), t.nRFCab),
        # per-bank refresh
        (CHANNEL, (ACT,), (REFPB,), t.nRRDS),
        (CHANNEL, (REFPB,), (REFPB, ACT), t.nRREFD),
        (BANK, (ACT,), (REFPB,), t.nRC),
        (BANK, (PRE,), (REFPB,), t.nRP),
        (BANK, (RDA,), (REFPB,), t.nRTP + t.nRP),
        (BANK, (WRA,), (REFPB,), wr_recovery + t.nRP),
        (BANK, (REFPB,), (ACT,), t.nRFCpb),
    ]
    return [Rule(level, p, n, lat) for level, prevs, nexts, lat in spec
            for p in prevs for n in nexts]

