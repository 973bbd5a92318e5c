"""An independent check of a command log against the GDDR6 timing edges and bank states.

It restates each JEDEC edge by name (tRCD, tRP, tRAS, tRC, tCCDS/L, tRRDS/L, tFAW, tWTR, tRTP,
tWR, RD->WR, tRFC) rather than reading the engine's rule table, and also checks what the table
cannot say: bank states, one command per channel per cycle, and data bursts that never overlap
on a channel's data bus. Used by the tests; slow on purpose (plain Python, every pair that matters).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from simulator.config.timing import GDDR6Timing
from simulator.dram import commands as C

READS = (C.RD, C.RDA)
WRITES = (C.WR, C.WRA)
COLUMN = READS + WRITES


def check_log(log: np.ndarray, t: GDDR6Timing, banks: int = 16, banks_per_group: int = 4,
              limit: int = 20) -> list[str]:
    """Violations found in (cycle, channel, command, bank group, bank, row) rows; [] if none."""
    bad: list[str] = []
    wr_rec = t.nCWL + t.nBL + t.nWR

    def fail(msg: str) -> None:
        if len(bad) < limit:
            bad.append(msg)

    # (channel) -> state
    open_row: dict[int, list[int]] = defaultdict(lambda: [-1] * banks)
    last_bank: dict[tuple[int, int, int], int] = {}    # (ch, bank, cmd) -> cycle
    last_bg: dict[tuple[int, int, int], int] = {}      # (ch, bg, cmd) -> cycle
    last_ch: dict[tuple[int, int], int] = {}           # (ch, cmd) -> cycle
    acts: dict[int, list[int]] = defaultdict(list)     # ch -> ACT/REFpb cycles
    bursts: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    cycle_seen: set[tuple[int, int]] = set()

    def since(table, key) -> float:
        return table.get(key, -10**12)

    def need(gap: float, minimum: int, what: str, cyc: int, ch: int) -> None:
        if gap < minimum:
            fail(f"channel {ch} cycle {cyc}: {what} needs {minimum} CK, got {int(gap)}")

    prev_cycle = -1
    for cyc, ch, cmd, bg, bank, row in (tuple(int(x) for x in r) for r in log):
        name = C.NAMES[cmd]
        if cyc < prev_cycle:
            fail(f"cycle {cyc}: log out of order")
        prev_cycle = cyc
        if (ch, cyc) in cycle_seen:
            fail(f"channel {ch} cycle {cyc}: two commands in one CK cycle")
        cycle_seen.add((ch, cyc))
        rows = open_row[ch]
        # cycles since the last command c at this bank, bank group, channel
        bank_key, bg_key = (ch, bank), (ch, bg)
        b = lambda c: cyc - since(last_bank, (*bank_key, c))  # noqa: E731, B023
        g = lambda c: cyc - since(last_bg, (*bg_key, c))  # noqa: E731, B023
        a = lambda c: cyc - since(last_ch, (ch, c))  # noqa: E731, B023

        if cmd == C.ACT:
            if rows[bank] != -1:
                fail(f"channel {ch} cycle {cyc}: ACT to open bank {bank}")
            need(b(C.ACT), t.nRC, "tRC (ACT->ACT, same bank)", cyc, ch)
            need(min(b(C.PRE), a(C.PREA)), t.nRP, "tRP (PRE->ACT)", cyc, ch)
            need(b(C.RDA), t.nRTP + t.nRP, "tRTP+tRP (RDA->ACT)", cyc, ch)
            need(b(C.WRA), wr_rec + t.nRP, "tWR+tRP (WRA->ACT)", cyc, ch)
            need(g(C.ACT), t.nRRDL, "tRRDL (ACT->ACT, same bank group)", cyc, ch)
            need(a(C.ACT), t.nRRDS, "tRRDS (ACT->ACT)", cyc, ch)
            need(a(C.REFAB), t.nRFCab, "tRFCab (REFab->ACT)", cyc, ch)
            need(b(C.REFPB), t.nRFCpb, "tRFCpb (REFpb->ACT, same bank)", cyc, ch)
            need(a(C.REFPB), t.nRREFD, "tRREFD (REFpb->ACT)", cyc, ch)
            rows[bank] = row
        elif cmd in COLUMN:
            if rows[bank] != row:
                fail(f"channel {ch} cycle {cyc}: {name} to bank {bank} row {row}, open row "
                     f"{rows[bank]}")
            is_read = cmd in READS
            need(b(C.ACT), t.nRCDRD if is_read else t.nRCDWR, f"tRCD (ACT->{name})", cyc, ch)
            same = READS if is_read else WRITES
            other = WRITES if is_read else READS
            need(min(g(c) for c in same), t.nCCDL, f"tCCDL ({name} after same type, same group)",
                 cyc, ch)
            need(min(a(c) for c in same), t.nCCDS, f"tCCDS ({name} after same type)", cyc, ch)
            if is_read:
                need(min(g(c) for c in other), t.nCWL + t.nBL + t.nWTRL, "tWTRL (WR->RD)", cyc, ch)
                need(min(a(c) for c in other), t.nCWL + t.nBL + t.nWTRS, "tWTRS (WR->RD)", cyc, ch)
                start = cyc + t.nCL
            else:
                need(min(a(c) for c in other), t.nCL + 1, "RD->WR turnaround", cyc, ch)
                start = cyc + t.nCWL
            bursts[ch].append((start, start + t.nBL, f"{name}@{cyc}"))
            if cmd in (C.RDA, C.WRA):
                rows[bank] = -1
        elif cmd == C.PRE:
            if rows[bank] == -1:
                fail(f"channel {ch} cycle {cyc}: PRE to closed bank {bank}")
            need(b(C.ACT), t.nRAS, "tRAS (ACT->PRE)", cyc, ch)
            need(b(C.RD), t.nRTP, "tRTP (RD->PRE)", cyc, ch)
            need(b(C.WR), wr_rec, "tWR (WR->PRE)", cyc, ch)
            rows[bank] = -1
        elif cmd == C.PREA:
            for k in range(banks):
                if rows[k] != -1:
                    need(cyc - since(last_bank, (ch, k, C.ACT)), t.nRAS, "tRAS (ACT->PREA)",
                         cyc, ch)
                    need(cyc - since(last_bank, (ch, k, C.RD)), t.nRTP, "tRTP (RD->PREA)",
                         cyc, ch)
                    need(cyc - since(last_bank, (ch, k, C.WR)), wr_rec, "tWR (WR->PREA)",
                         cyc, ch)
            open_row[ch] = [-1] * banks
        elif cmd == C.REFAB:
            if any(r != -1 for r in rows):
                fail(f"channel {ch} cycle {cyc}: REFab with a bank open")
            need(a(C.ACT), t.nRC, "tRC (ACT->REFab)", cyc, ch)
            need(min(a(C.PRE), a(C.PREA)), t.nRP, "tRP (PRE->REFab)", cyc, ch)
            need(a(C.REFAB), t.nRFCab, "tRFCab (REFab->REFab)", cyc, ch)
        elif cmd == C.REFPB:
            if rows[bank] != -1:
                fail(f"channel {ch} cycle {cyc}: REFpb to open bank {bank}")
            need(b(C.ACT), t.nRC, "tRC (ACT->REFpb)", cyc, ch)
            need(b(C.PRE), t.nRP, "tRP (PRE->REFpb)", cyc, ch)
            need(a(C.REFPB), t.nRREFD, "tRREFD (REFpb->REFpb)", cyc, ch)
            need(a(C.REFAB), t.nRFCab, "tRFCab (REFab->REFpb)", cyc, ch)
        if cmd in (C.ACT, C.REFPB):
            window = acts[ch]
            window.append(cyc)
            if len(window) >= 5 and cyc - window[-5] < t.nFAW:
                fail(f"channel {ch} cycle {cyc}: five activations within {cyc - window[-5]} CK "
                     f"(tFAW {t.nFAW})")
            del window[:-5]
        if bank >= 0:
            last_bank[(ch, bank, cmd)] = cyc
        if bg >= 0:
            last_bg[(ch, bg, cmd)] = cyc
        last_ch[(ch, cmd)] = cyc

    for ch, spans in bursts.items():
        spans.sort()
        for (_s0, e0, w0), (s1, _e1, w1) in zip(spans, spans[1:], strict=False):
            if s1 < e0:
                fail(f"channel {ch}: data bursts of {w0} and {w1} overlap on the bus")
    return bad
