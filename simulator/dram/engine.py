"""The burst-level core: CK-cycle scheduling of GDDR6 channels, compiled with numba.

The story each CK cycle, per channel (the order of Ramulator 2's generic controller):
  1. refresh: at each refresh interval a refresh request joins the priority queue;
  2. schedule: the best request in the active buffer (rows opened for it) if its next command
     is ready; else the refresh (all-bank refresh blocks the channel until it issues; a
     per-bank one goes when its bank is free, and once more are owed than the controller
     postpones, its bank takes no reads or writes until then); else the
     read or write buffer (write mode by watermarks), FR-FCFS: ready commands first, then oldest;
     a precharge is held back while an activated request still waits for that bank (with the
     hit guard, also while any request for the bank's open row is queued);
  3. issue: at most one command per channel per CK cycle; timing rules update the earliest
     cycle of later commands at channel, bank-group and bank scope.
Then the front end hands requests over, as many as the buffers accept. Two front ends:
  - in order (`run`): the trace's order across all channels, the first request to find its
    buffer full holding back every one behind it, as Ramulator's trace front end does;
  - per channel (`run_channels`): each channel takes its own requests in trace order, a full
    buffer holding back only that channel's, as a GPU's memory partitions are fed. Nothing then
    couples the channels, so each runs on its own clock to the end of a feed, and threads
    share the channels out (the engine releases the GIL).
Channels skip to their next possible event, so the cost follows commands, not cycles: after a
try that issues too, on deep buffers, where FR-FCFS's pass over the banks bounds when the others
could issue next (tests compare with trying every cycle). A channel idle until far ahead (on
the in-order front end, every channel) skips whole refresh periods once one is seen to repeat
(`_idle_probe`), so a sparse trace costs its requests, not its length in refreshes.

All times are CK cycles. Requests live in per-channel buffers as rows of int64 fields, so the
trace can be streamed through in chunks. Each buffer is a ring in age order (`heads` holds where
it starts): the scheduler mostly takes requests near the front, and a ring closes the gap from
the shorter side, where a flat array would move every younger request up.
On deep buffers (the GPU controller's hundreds of requests) FR-FCFS first asks per bank whether
its open-row requests or its others could issue, from tallies kept as requests come and go, and
scans for the oldest request only when some could; most tries find nothing ready and so cost a
pass over the banks rather than over the buffer. The scan starts past the oldest requests that
the last scans passed over, while no bank's class they hold (its open row, or its others) is
ready and no open row has changed.
A read is forwarded from a queued write to its address. Each channel counts its queued writes
per slot of a hashed filter, with the XOR of their fingerprints (other bits of the hash), so a
read looks through the writes only when its slot holds two or more, or one whose fingerprint is
the read's: on deep write buffers that look had cost more than scheduling, and with counts
alone every look on the transformer step was a false alarm.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# The engine allocates nothing, so it runs without numba's runtime (NRT): with it, each call to
# a helper that is not inlined increfs and decrefs every array argument with an atomic
# instruction, which took a quarter of the time on the GPU's deep buffers.
JIT = {"cache": True, "error_model": "numpy", "_nrt": False}
# The helpers are inlined by LLVM (forceinline): a call passes each array as a dozen words,
# which on the hot path cost about as much as the work. Numba's own inlining (inline="always")
# gives as fast a kernel at about twice the compile time.

# buffer kinds
RBUF, WBUF, ABUF = 0, 1, 2
# request fields: a request's bank, bank group, row, direction and whether its first command
# has been counted are packed into one key (K_*), so that the buffers' rings, which move a
# request's fields one slot along to close each gap, move four words rather than eight
F_ID, F_ADDR, F_KEY, F_ARRIVE = range(4)
N_FIELDS = 4
K_BANK = 63           # bits 0-5: bank (bank bitmasks are int64, so 64 banks at most)
K_BG_SHIFT = 6        # bits 6-11: bank group (as many as banks at most)
K_BG = 63
K_WRITE = 1 << 12     # a write
K_STAT = 1 << 13      # its first command has been counted (hit, miss or conflict)
K_ROW_SHIFT = 16      # bits 16-: row
K_BANK_ROW = ~((np.int64(1) << K_ROW_SHIFT) - 1) | K_BANK  # the bank's and row's bits
# fields of a request grouped by channel (per-channel front ends): its key packed as in the
# buffers, so that grouping writes four words a request and taking it in packs nothing
G_ID, G_ADDR, G_KEY, G_ARRIVE = range(4)
N_GROUPED = 4
# scalar state slots (int64)
S_CLK, S_POS, S_QUEUED, S_DONE_READS, S_DONE_WRITES, S_LAST_DONE, S_LOG_N, S_FORWARDED = range(8)
S_ID_BASE = 8  # the id of the feed's first request: ids run on across feeds, so a request
# queued by an earlier feed writes no completion into this one's
S_IDLE_SKIPPED = 9  # idle refresh periods skipped (`_idle_skip`)
N_SCALARS = 10
# per-channel counters
C_HIT, C_MISS, C_CONFLICT, C_BUSY, C_RW_SWITCH, C_WR_MODE, C_NEXT_REF, C_REF_BANK = range(8)
C_LAST_COL, C_PENDING_REF, C_NEXT_TRY = 8, 9, 10
# a lower bound on when an activated request can next issue (0: look again); bounds only grow
# and an activated request's row stays open, so it holds until a request leaves the active
# buffer (one that joins lowers it to its own earliest cycle)
C_ABUF_T = 11
# column commands that follow one to the same bank group (spaced nCCDL, not nCCDS), and that group
C_SAME_BG, C_LAST_BG = 12, 13
C_CLK = 14  # the channel's own clock, with per-channel front ends
# per buffer kind (read, write), the banks whose open-row tally an ACT has made unknown, as bits
C_STALE = 15
# per buffer kind (read, write), where the tallies are kept: how many of the oldest requests
# FR-FCFS's scan may pass over unread (C_PASSED), and which banks' classes they hold (C_SEEN,
# packed as _first_ready packs the ready banks); see _first_ready
C_PASSED, C_SEEN = 17, 19
N_CHANNEL_COUNTERS = 21
# where controllers keep per-bank tallies (deep buffers), a channel has at most this many banks:
# FR-FCFS packs its two classes' ready banks into one int64 (see _first_ready)
CLASS_SHIFT_BITS = 5
CLASS_SHIFT = 1 << CLASS_SHIFT_BITS
GDDR6_BANKS = 16  # a GDDR6 channel's banks (4 groups of 4): the bank pass unrolled for them
# commands (kept in step with commands.py by tests)
ACT, PRE, PREA, RD, WR, RDA, WRA, REFAB, REFPB = range(9)
N_CMD = 9
# the commands whose bank bounds the scheduler asks for (RDA and WRA are issued where RD and WR
# are ready; PREA and REFAB wait on channel bounds only): the others' are not kept
BANK_ASKED = (ACT, PRE, RD, WR, REFPB)
INF = np.int64(1) << np.int64(62)
# Arguments that would be integer literals at a helper's call site: numba compiles a helper
# once per literal value it is called with (Literal[int](-1), ...), a first run's compile
# time spent again for each. As numpy scalars they are plain int64, one compile per helper;
# LLVM folds the constant after inlining all the same.
NONE = np.int64(-1)   # no bank, no rule bank: the helpers' "none" argument
ADD, REMOVE = np.int64(1), np.int64(-1)  # a request counted into, or out of, the tallies
ACTIVE_BUF = np.int64(ABUF)  # ABUF as an argument
RECORD, COMPARE = np.bool_(True), np.bool_(False)  # _idle_probe's two uses
NO_RULE = -(np.int64(1) << np.int64(40))  # a latency that never binds
LAT_BINS = 1 << 16
DEEP_BUFFERS = 64  # controllers with a read or write buffer this deep keep per-bank tallies
SCAN_BELOW = 16  # where kept, FR-FCFS over fewer queued requests than this scans them in one
# pass (two with the hit guard): on the GPU path's deep buffers the tallies' pass over the
# banks already costs less from 16 queued
HASH_MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing of addresses into the write filter
FINGERPRINT_SHIFT = np.uint64(49)  # a write's fingerprint: the hash's top 15 bits (the slot's are
# bits 32 up), so the XOR of fingerprints stays a non-negative int16
W_COUNT, W_XOR = 0, 1  # per filter slot: writes queued, XOR of their fingerprints
WRITE_FILTER_PER_WRITE = 4  # write filter slots per write a channel can hold: few false
# alarms (a slot holding one write answers by its fingerprint), in a table small enough to
# stay in cache beside the buffers


@njit(**JIT, forceinline=True)
def _bank_index(bg, bank, bg_shift):
    """The channel's index of a bank given within its group (each group's banks side by side,
    as the decode gives them)."""
    return (bg << bg_shift) | bank


@njit(**JIT, forceinline=True)
def _key(row, is_w, bg, bank, bg_shift):
    """A request's key (K_*): its row, direction, bank group and, from its bank within the
    group, the channel's bank index."""
    return ((row << K_ROW_SHIFT) | (K_WRITE if is_w else 0) | (bg << K_BG_SHIFT)
            | _bank_index(bg, bank, bg_shift))


@njit(**JIT, forceinline=True)
def _faw_ready(faw, ch, n_faw):
    """The earliest cycle for the next ACT or REFpb by nFAW: the oldest of the last four
    (faw[ch, :4] is their ring, faw[ch, 4] counts them) plus the window."""
    return faw[ch, faw[ch, 4] & 3] + n_faw


@njit(**JIT, forceinline=True)
def _ready_at(rch, rbank, faw, ch, cmd, bank, n_faw):
    t = rch[ch, cmd]
    if bank >= 0 and rbank[ch, cmd, bank] > t:
        t = rbank[ch, cmd, bank]
    if cmd == ACT or cmd == REFPB:
        f = _faw_ready(faw, ch, n_faw)
        if f > t:
            t = f
    return t


@njit(**JIT, forceinline=True)
def _issue(rule_lat, rch, rbank, faw, open_row, cmd_count,
           ch, cmd, bg, bank, row, clk, log, scal, log_cap, n_banks, bg_shift):
    """Issue a command: raise the earliest cycle of every later command by the timing rules
    (rule_lat[level, cmd, next], NO_RULE where none applies), then update the bank state.
    The bank-group rules raise the bound of each bank in the group: bounds kept per bank
    only (the latest of its group's and its own) cost one look per command where the
    scheduler looks for one."""
    for nxt in range(N_CMD):  # (branch-free, so the compiler can take several at once)
        rch[ch, nxt] = max(rch[ch, nxt], clk + rule_lat[0, cmd, nxt])
    if bank >= 0:
        # (unsigned bank indices: numba checks each signed one for a negative value to wrap)
        first = np.uint64(bg) << np.uint64(bg_shift)
        for nxt in BANK_ASKED:
            bounds = rbank[ch, nxt]
            t = clk + rule_lat[1, cmd, nxt]
            if bg_shift == 2:  # GDDR6's four banks a group: a loop the compiler unrolls
                for j in range(np.uint64(4)):
                    bounds[first + j] = max(bounds[first + j], t)
            else:
                for j in range(np.uint64(1) << np.uint64(bg_shift)):
                    bounds[first + j] = max(bounds[first + j], t)
            t = clk + rule_lat[2, cmd, nxt]
            if t > bounds[bank]:
                bounds[bank] = t
    if cmd == ACT or cmd == REFPB:
        slot = faw[ch, 4] & 3
        faw[ch, slot] = clk
        faw[ch, 4] += 1
    if cmd == ACT:
        open_row[ch, bank] = row
    elif cmd == PRE or cmd == RDA or cmd == WRA:
        open_row[ch, bank] = -1
    elif cmd == PREA:
        for b in range(n_banks):
            open_row[ch, b] = -1
    cmd_count[ch, cmd] += 1
    n = scal[S_LOG_N]
    if n < log_cap:
        log[n, 0] = clk
        log[n, 1] = ch
        log[n, 2] = cmd
        log[n, 3] = bg
        log[n, 4] = bank
        log[n, 5] = row
    scal[S_LOG_N] = n + 1


@njit(**JIT, forceinline=True)
def _slot(h, i, mask):
    """The ring slot i places on from h, as an unsigned index: numba checks each signed index
    for a negative value to wrap, which in the scans over the buffers came to 6 % of the
    engine's instructions on the GPU's deep queues."""
    return np.uint64(h + i) & np.uint64(mask)


@njit(**JIT, forceinline=True)
def _remove(bufs, counts, heads, ch, kind, p):
    """Take the request in slot p out of its ring, closing the gap from the shorter side: the
    requests on that side move one slot along, in runs of adjacent slots (one run, or two where
    the ring wraps) with all fields at each step, so that a run is one loop whose end the
    branch predictor misses once (a loop per field missed its end four times, which with a
    few requests moved at a time cost more than the moves; a slot-by-slot loop with the wrap
    in each index had come to a tenth of the engine's time on the GPU's deep buffers)."""
    mask = np.uint64(bufs.shape[3] - 1)
    n = counts[ch, kind]
    h = np.uint64(heads[ch, kind])
    q = np.uint64(p)
    one = np.uint64(1)
    rows = bufs[ch, kind]
    i = (q - h) & mask  # its place in age order
    if i < np.uint64(n - 1) - i:  # fewer older requests (slots h to q - 1): one slot younger
        if h <= q:
            _shift_up(rows, h, q)
        else:
            _shift_up(rows, np.uint64(0), q)
            for f in range(N_FIELDS):
                rows[f, 0] = rows[f, mask]
            _shift_up(rows, h, mask)
        heads[ch, kind] = (h + one) & mask
    else:  # the younger requests (slots q + 1 to last): one slot older
        last = (h + np.uint64(n - 1)) & mask
        if q <= last:
            _shift_down(rows, q, last)
        else:
            _shift_down(rows, q, mask)
            for f in range(N_FIELDS):
                rows[f, mask] = rows[f, 0]
            _shift_down(rows, np.uint64(0), last)
    counts[ch, kind] = n - 1


@njit(**JIT, forceinline=True)
def _shift_up(rows, lo, hi):
    """Slots lo to hi - 1 move one slot up (into lo + 1 to hi), every field."""
    for j in range(hi, lo, -1):
        for f in range(N_FIELDS):
            rows[f, j] = rows[f, j - np.uint64(1)]


@njit(**JIT, forceinline=True)
def _shift_down(rows, lo, hi):
    """Slots lo + 1 to hi move one slot down (into lo to hi - 1), every field."""
    for j in range(lo, hi):
        for f in range(N_FIELDS):
            rows[f, j] = rows[f, j + np.uint64(1)]


@njit(**JIT, forceinline=True)
def _hits_current(chan, ch, kind, bank):
    """1 while the bank's open-row tally for this buffer kind is current, 0 while an ACT has
    left it to be counted anew (its bit in C_STALE); a number, for arithmetic."""
    return ~(chan[ch, C_STALE + kind] >> bank) & 1


@njit(**JIT, forceinline=True)
def _hits_known(bank_hits, chan, ch, kind, bank):
    """Is the bank's open-row tally for this buffer kind kept and current?"""
    return bank_hits.shape[0] > 0 and _hits_current(chan, ch, kind, bank) == 1


@njit(**JIT, forceinline=True)
def _tally(bank_queued, bank_hits, chan, open_row, ch, kind, bank, row, step):
    """Count a request into (step 1) or out of (step -1) its bank's tallies, where kept (not
    the open-row tally while an ACT has left it to be counted anew)."""
    if bank_queued.shape[0] == 0:
        return
    bank_queued[ch, kind, bank] += step
    # (by arithmetic, not a branch: whether a request wants its bank's open row follows no
    # pattern a branch predictor could learn; both tallies are kept where either is)
    counted = np.int64(open_row[ch, bank] == row) & _hits_current(chan, ch, kind, bank)
    bank_hits[ch, kind, bank] += step * counted


@njit(**JIT, forceinline=True)
def _unpass(bufs, heads, chan, ch, kind, p):
    """The request in slot p is leaving its buffer: if it is among the oldest requests that
    FR-FCFS's scan passes over (C_PASSED), they are one fewer (what they hold, C_SEEN, may
    keep its class: a superset only sends the scan back to the front)."""
    if (p - heads[ch, kind]) & (bufs.shape[3] - 1) < chan[ch, C_PASSED + kind]:
        chan[ch, C_PASSED + kind] -= 1


@njit(**JIT, forceinline=True)
def _leave(bufs, counts, heads, bank_queued, bank_hits, chan, open_row, ch, kind, p, bank,
           row):
    """The request in slot p leaves its buffer: out of its bank's tallies and the scan's
    passed-over requests (read and write buffers keep them), then out of the ring."""
    if kind != ABUF:
        _tally(bank_queued, bank_hits, chan, open_row, ch, kind, bank, row, REMOVE)
        _unpass(bufs, heads, chan, ch, kind, p)
    _remove(bufs, counts, heads, ch, kind, p)


@njit(**JIT, forceinline=True)
def _rows_changed(bank_hits, chan, ch, cmd, bank):
    """After a command, how many queued requests want the bank's open row: unknown after an
    ACT (the bank's bit set in the channel's C_STALE masks, so that the next count finds it
    without a pass over the banks), none after a precharge."""
    if bank_hits.shape[0] == 0:
        return
    if cmd == ACT or cmd == PRE or cmd == RDA or cmd == WRA or cmd == PREA:
        # a bank's requests may have changed class: the scan reads every request again
        chan[ch, C_PASSED + RBUF] = 0
        chan[ch, C_PASSED + WBUF] = 0
    if cmd == ACT:
        chan[ch, C_STALE + RBUF] |= np.int64(1) << bank
        chan[ch, C_STALE + WBUF] |= np.int64(1) << bank
    elif cmd == PRE or cmd == RDA or cmd == WRA:
        bank_hits[ch, RBUF, bank] = 0
        bank_hits[ch, WBUF, bank] = 0
        chan[ch, C_STALE + RBUF] &= ~(np.int64(1) << bank)
        chan[ch, C_STALE + WBUF] &= ~(np.int64(1) << bank)
    elif cmd == PREA:
        bank_hits[ch, RBUF, :] = 0
        bank_hits[ch, WBUF, :] = 0
        chan[ch, C_STALE + RBUF] = 0
        chan[ch, C_STALE + WBUF] = 0


@njit(**JIT, forceinline=True)
def _recount_hits(bufs, counts, heads, bank_queued, bank_hits, chan, open_row, ch, kind):
    """Count the requests for each bank's open row where an ACT has made it unknown: per such
    bank (seldom more than one) a count of the keys equal in bank and row over the ring's one
    or two runs of slots, which the compiler does several keys at a time."""
    unknown = chan[ch, C_STALE + kind]
    if unknown == 0:
        return
    chan[ch, C_STALE + kind] = 0
    keys = bufs[ch, kind, F_KEY]
    h = heads[ch, kind]
    n = counts[ch, kind]
    first = min(n, bufs.shape[3] - h)  # slots h to h + first - 1, then 0 to n - first - 1
    for bank in range(bank_hits.shape[2]):
        if unknown & (np.int64(1) << bank):
            found = 0
            if bank_queued[ch, kind, bank] > 0:
                want = (open_row[ch, bank] << K_ROW_SHIFT) | bank
                for p in range(h, h + first):
                    found += (keys[p] & K_BANK_ROW) == want
                for p in range(n - first):
                    found += (keys[p] & K_BANK_ROW) == want
            bank_hits[ch, kind, bank] = found


@njit(**JIT, forceinline=True)
def _write_slot(write_filter, addr):
    """The write filter's slot for an address: bits from the middle of a Fibonacci hash, which
    every address bit below them stirs."""
    return np.int64((np.uint64(addr) * HASH_MUL) >> np.uint64(32)) & (write_filter.shape[1] - 1)


@njit(**JIT, forceinline=True)
def _fingerprint(addr):
    """Bits of the address's hash that the slot does not use."""
    return np.int64((np.uint64(addr) * HASH_MUL) >> FINGERPRINT_SHIFT)


@njit(**JIT, forceinline=True)
def _count_write(write_filter, ch, addr, step):
    """Count a write to this address into (step 1) or out of (step -1) the channel's filter."""
    slot = write_filter[ch, _write_slot(write_filter, addr)]
    slot[W_COUNT] += step
    slot[W_XOR] ^= _fingerprint(addr)


@njit(**JIT, forceinline=True)
def _write_maybe_queued(write_filter, ch, addr):
    """Could a write to this address be queued on the channel? False is certain; True sends
    the look through the queued writes (`_write_queued`). A slot holding one write holds its
    fingerprint, so only a write to the same address or a fingerprint's match sends it."""
    slot = write_filter[ch, _write_slot(write_filter, addr)]
    n = slot[W_COUNT]
    return n > 1 or (n == 1 and slot[W_XOR] == _fingerprint(addr))


@njit(**JIT, forceinline=True)
def _write_queued(bufs, counts, heads, ch, addr):
    """Is a write to this address queued on the channel (buffered or activated)?"""
    mask = bufs.shape[3] - 1
    h = heads[ch, WBUF]
    for i in range(counts[ch, WBUF]):
        if bufs[ch, WBUF, F_ADDR, _slot(h, i, mask)] == addr:
            return True
    h = heads[ch, ABUF]
    for i in range(counts[ch, ABUF]):
        p = _slot(h, i, mask)
        if bufs[ch, ABUF, F_KEY, p] & K_WRITE and bufs[ch, ABUF, F_ADDR, p] == addr:
            return True
    return False


@njit(**JIT, forceinline=True)
def _complete(completion, scal, rid, done):
    """Record a request's completion cycle, where it belongs to the current feed."""
    i = rid - scal[S_ID_BASE]
    if i >= 0 and i < completion.shape[0]:
        completion[i] = done


@njit(**JIT, forceinline=True)
def _forward(bufs, counts, heads, lat_hist, scal, completion, ch, addr, rid, clk):
    """Serve a read from a write to its address queued on the channel (buffered or
    activated), next cycle; False when there is none."""
    if not _write_queued(bufs, counts, heads, ch, addr):
        return False
    done = clk + 1
    lat_hist[1] += 1
    scal[S_DONE_READS] += 1
    scal[S_FORWARDED] += 1
    if done > scal[S_LAST_DONE]:
        scal[S_LAST_DONE] = done
    _complete(completion, scal, rid, done)
    return True


@njit(**JIT, forceinline=True)
def _append(bufs, counts, heads, ch, kind, src_kind, p):
    """Copy the request in slot p of another buffer of the channel to the back of this one."""
    mask = bufs.shape[3] - 1
    n = counts[ch, kind]
    q = (heads[ch, kind] + n) & mask
    for f in range(N_FIELDS):
        bufs[ch, kind, f, q] = bufs[ch, src_kind, f, p]
    counts[ch, kind] = n + 1


@njit(**JIT, forceinline=True)
def _row_wanted(bufs, counts, heads, ch, bank, row, skip_kind, skip_p):
    """Does any queued request other than the one in (skip_kind, slot skip_p) want this row?"""
    mask = bufs.shape[3] - 1
    for kind in range(3):
        h = heads[ch, kind]
        for i in range(counts[ch, kind]):
            p = _slot(h, i, mask)
            if kind == skip_kind and np.int64(p) == skip_p:
                continue
            key = bufs[ch, kind, F_KEY, p]
            if key & K_BANK == bank and key >> K_ROW_SHIFT == row:
                return True
    return False


@njit(**JIT, forceinline=True)
def _active_blocks(bufs, counts, heads, ch, bank):
    """A precharge of `bank` (or of all banks, bank < 0) would close a row opened for a
    request still waiting in the active buffer."""
    mask = bufs.shape[3] - 1
    h = heads[ch, ABUF]
    for i in range(counts[ch, ABUF]):
        if bank < 0 or bufs[ch, ABUF, F_KEY, _slot(h, i, mask)] & K_BANK == bank:
            return True
    return False


@njit(**JIT, forceinline=True)
def _next_command(open_row, ch, bank, row, is_write, ref_bank):
    """The command a request needs next: column if its row is open, else ACT or PRE."""
    if open_row[ch, bank] == row:
        return WR if is_write else RD
    return _row_command(open_row, ch, bank, ref_bank)


@njit(**JIT, forceinline=True)
def _row_command(open_row, ch, bank, ref_bank):
    """The command a request for a row other than the bank's open one needs next: PRE, or
    ACT when the bank is closed (-1 while the bank waits for a per-bank refresh)."""
    if open_row[ch, bank] >= 0:
        return PRE
    if bank == ref_bank:
        return -1
    return ACT


@njit(**JIT, forceinline=True)
def _earliest(rch, rbank, faw_t, ch, cmd, bank):
    """The latest of the command's channel, bank-group and bank bounds (and nFAW for ACT)."""
    if cmd < 0:
        return INF
    t = rch[ch, cmd]
    x = rbank[ch, cmd, bank]
    if x > t:
        t = x
    if cmd == ACT and faw_t > t:
        t = faw_t
    return t


@njit(**JIT, forceinline=True)
def _bank_pass(queued, hits, opened, col_at, pre_at, act_at, ch_col, ch_pre, ch_act, clk,
               ref_bank, hit_guard):
    """Per bank of a buffer: (banks whose open-row requests can issue now, banks whose other
    requests can, the earliest cycle of those that cannot). One branch-free pass, which the
    compiler does several banks at a time; a class with no request is never ready, nor (with
    the hit guard) the other requests of a bank with open-row requests queued."""
    if queued.shape[0] == GDDR6_BANKS:  # a pass of known length, which the compiler unrolls
        return _bank_pass_over(GDDR6_BANKS, queued, hits, opened, col_at, pre_at, act_at,
                               ch_col, ch_pre, ch_act, clk, ref_bank, hit_guard)
    return _bank_pass_over(queued.shape[0], queued, hits, opened, col_at, pre_at, act_at,
                           ch_col, ch_pre, ch_act, clk, ref_bank, hit_guard)


@njit(**JIT, forceinline=True)
def _bank_pass_over(n_banks, queued, hits, opened, col_at, pre_at, act_at, ch_col, ch_pre,
                    ch_act, clk, ref_bank, hit_guard):
    earliest = INF
    ready_hit = 0
    ready_miss = 0
    for bank in range(n_banks):
        n_queued = queued[bank]
        n_hits = hits[bank]
        row = opened[bank]
        t_hit = max(ch_col, col_at[bank])
        t_pre = max(ch_pre, pre_at[bank])
        t_act = max(ch_act, act_at[bank])
        t_miss = t_pre if row >= 0 else t_act
        t_hit = INF if n_hits <= 0 else t_hit
        # (bitwise, not `or`/`and`: branches would keep the compiler from taking the banks
        # several at a time)
        t_miss = INF if ((n_queued <= n_hits) | ((bank == ref_bank) & (row < 0))
                         | (hit_guard & (n_hits > 0))) else t_miss
        ready_hit |= np.int64(t_hit <= clk) << bank
        ready_miss |= np.int64(t_miss <= clk) << bank
        earliest = min(earliest, t_hit if t_hit > clk else INF)
        earliest = min(earliest, t_miss if t_miss > clk else INF)
    return ready_hit, ready_miss, earliest


@njit(**JIT, forceinline=True)
def _first_ready(bufs, counts, heads, bank_queued, bank_hits, chan, ch, kind, open_row, rch,
                 rbank, faw_t, clk, ref_bank, held, hit_guard):
    """FR-FCFS over a read or write buffer, whose order is age order: the first request whose
    next command is ready. Returns (slot or -1, command, earliest ready cycle seen of the
    commands not ready now, which of the other banks' commands are ready now: 1 column, 2 row).
    With bounds that only grow, these bound when the other banks can issue after this one.

    A bank's queued requests fall in two classes that each wait for one command: those for its
    open row (the column command) and the others (PRE, or ACT when the bank is closed). So the
    ready cycle is found per class from the bank tallies, and the buffer is scanned, oldest
    first, only for the first request of a class that is ready.

    `hit_guard`: a bank is not precharged for an older request to another row while requests
    for its open row are queued (they are served first, as a GPU's scheduler serves a row's
    requests before it moves on; the precharge would have them reopen the row later)."""
    _recount_hits(bufs, counts, heads, bank_queued, bank_hits, chan, open_row, ch, kind)
    col = WR if kind == WBUF else RD
    ready_hit, ready_miss, earliest = _bank_pass(
        bank_queued[ch, kind], bank_hits[ch, kind], open_row[ch], rbank[ch, col],
        rbank[ch, PRE], rbank[ch, ACT], rch[ch, col], rch[ch, PRE], max(rch[ch, ACT], faw_t),
        clk, ref_bank, hit_guard)
    if held >= 0:  # (its times stay in earliest: a bound on the next try may come early)
        ready_hit &= ~(np.int64(1) << held)
        ready_miss &= ~(np.int64(1) << held)
    if ready_hit == 0 and ready_miss == 0:
        return -1, -1, earliest, 0
    mask = bufs.shape[3] - 1
    h = heads[ch, kind]
    keys = bufs[ch, kind, F_KEY]
    opened = open_row[ch]
    # Both classes' ready banks in one word, the open-row class's 32 bits up, so that a request
    # is looked up by a shift rather than a branch: those passed over (of banks not ready, or
    # held back by the hit guard) come in no order a branch predictor could learn, and a
    # choice between the two masks compiles to a branch. (GDDR6 has 16 banks a channel.)
    both = ready_miss | (ready_hit << CLASS_SHIFT)
    # The oldest requests, which the last scans passed over, are read again only when a class
    # they hold is ready now (or a bank's open row has changed since, C_PASSED cleared): most
    # tries find the same requests held back at the front (other rows of a bank whose open
    # row still has requests queued, banks bound by the last command), which the scan had
    # read each time.
    passed = chan[ch, C_PASSED + kind]
    seen = chan[ch, C_SEEN + kind]
    if passed == 0 or both & seen:
        passed = 0
        seen = 0
    for i in range(passed, counts[ch, kind]):
        p = _slot(h, i, mask)
        key = keys[p]
        bank = key & K_BANK
        hit = np.int64(key >> K_ROW_SHIFT == opened[bank])
        c = bank | (hit << CLASS_SHIFT_BITS)
        if not (both >> c) & 1:
            seen |= np.int64(1) << c
            continue
        chan[ch, C_PASSED + kind] = i
        chan[ch, C_SEEN + kind] = seen
        bit = np.int64(1) << bank
        # the other banks with a command ready now: 1 for a column command, 2 for a row one
        others = (1 if ready_hit & ~bit else 0) | (2 if ready_miss & ~bit else 0)
        if hit:
            return np.int64(p), col, earliest, others
        return np.int64(p), _row_command(open_row, ch, bank, ref_bank), earliest, others
    return -1, -1, earliest, 0  # not reached: a ready class has a request


@njit(**JIT, forceinline=True)
def _first_ready_scan(bufs, counts, heads, ch, kind, open_row, rch, rbank, faw_t, clk,
                      ref_bank, held, hit_guard, bound):
    """`_first_ready` by one pass over the buffer, cheaper where it is short. With `bound`
    the pass goes on past the request it takes, so that it returns the same bounds on the
    other banks' next commands (the earliest cycle of those not ready, which are ready now: 1
    column, 2 row); without, it stops there and returns that request's ready cycle (shallow
    buffers of random rows, as the reference systems', lose more to the rest of the pass than
    the skip wins). (Its hot loop reads the requests through views of the channel's buffer:
    free without the NRT.)"""
    mask = bufs.shape[3] - 1
    h = heads[ch, kind]
    col = WR if kind == WBUF else RD
    keys = bufs[ch, kind, F_KEY]
    opened = open_row[ch]
    earliest = INF
    last_bank = -1
    last_row = -1
    # banks already looked at for a row other than their open one, and for their open row:
    # another request to such a bank in the same case needs the same command at the same bank,
    # ready or waiting as long (with the hit guard, a bank's other rows also wait while
    # requests for its open row are queued: those banks start out in miss_seen)
    # (a bank whose overdue refresh holds it starts out in both: nothing for it until then)
    miss_seen = 0 if held < 0 else np.int64(1) << held
    hit_seen = miss_seen
    if hit_guard:
        for i in range(counts[ch, kind]):
            p = _slot(h, i, mask)
            bank = keys[p] & K_BANK
            if keys[p] >> K_ROW_SHIFT == opened[bank]:
                miss_seen |= np.int64(1) << bank
    found = np.int64(-1)
    found_cmd = -1
    others = 0
    for i in range(counts[ch, kind]):
        p = _slot(h, i, mask)
        bank = keys[p] & K_BANK
        row = keys[p] >> K_ROW_SHIFT
        if bank == last_bank and row == last_row:
            continue  # same row as the request before it: same command, same cycle
        last_bank = bank
        last_row = row
        cur = opened[bank]
        bit = np.int64(1) << bank
        if cur == row:
            if hit_seen & bit:
                continue
            hit_seen |= bit
            cmd = col
        else:
            if miss_seen & bit:
                continue
            miss_seen |= bit
            cmd = _row_command(open_row, ch, bank, ref_bank)
        t = _earliest(rch, rbank, faw_t, ch, cmd, bank)
        if t > clk:
            if t < earliest:
                earliest = t
        elif found < 0:
            if not bound:
                return np.int64(p), cmd, t, 0
            found = np.int64(p)
            found_cmd = cmd
            # the bank it takes is bounded anew after the command: its others are passed over
            hit_seen |= bit
            miss_seen |= bit
        else:
            others |= 1 if cmd == col else 2
    return found, found_cmd, earliest, others


@njit(**JIT, forceinline=True)
def _bank_next(rch, rbank, faw, open_row, ch, kind, bank, n_faw):
    """The earliest a request of this buffer kind could next issue at the bank: its open
    row's column command, or the row command (PRE, or ACT when closed)."""
    faw_t = _faw_ready(faw, ch, n_faw)
    t = _earliest(rch, rbank, faw_t, ch, WR if kind == WBUF else RD, bank)
    r = _earliest(rch, rbank, faw_t, ch, _row_command(open_row, ch, bank, NONE), bank)
    return r if r < t else t


@njit(**JIT, forceinline=True)
def _mode_switches(write_mode, n_reads, n_writes, write_high, write_low):
    """Does the channel turn from reads to writes (more writes queued than `write_high`, its
    high watermark, or only writes queued), or back (fewer than `write_low`, with reads
    queued)?"""
    if write_mode == 0:
        return n_writes > write_high or (n_reads == 0 and n_writes > 0)
    return n_writes < write_low and n_reads > 0


@njit(**JIT, forceinline=True)
def _arrival_wake(chan, counts, caps, bank_hits, open_row, rch, rbank, faw, ch, kind, bank,
                  row, clk, fcfs, write_high, write_low, n_faw, hit_guard):
    """When a request just queued on channel ch can first change what the channel does.

    The next cycle where it could turn the channel's read/write mode, and under FCFS (kept
    simple). Otherwise only the request itself is new (a pending refresh only holds it back
    longer): FR-FCFS takes it once its command is ready if it is in the buffer being served,
    and never before the mode turns if not (the channel's next try already covers every other
    event). With the hit guard, a request for another row than its bank's open one, which
    requests of its buffer still want, waits for the last of those, whose column command
    wakes the channel for the bank; and the first request for a bank's open row holds that
    bank's other requests back, which can make another request the oldest ready one (one
    whose turn a held-back precharge had taken), so it wakes the channel."""
    if fcfs or _mode_switches(chan[ch, C_WR_MODE], counts[ch, RBUF], counts[ch, WBUF],
                              write_high, write_low):
        return clk + 1
    if (kind == WBUF) != (chan[ch, C_WR_MODE] == 1):
        return INF
    if hit_guard and open_row[ch, bank] >= 0:
        known = _hits_known(bank_hits, chan, ch, kind, bank)
        if open_row[ch, bank] == row:
            # the first for the open row: the bank's other rows are held back from now, so
            # another request may now be the oldest ready one
            if not known or bank_hits[ch, kind, bank] == 1:
                return clk + 1
        elif known and bank_hits[ch, kind, bank] > 0:
            return INF  # held back until the last request for the open row is served
    faw_t = _faw_ready(faw, ch, n_faw)
    cmd = _next_command(open_row, ch, bank, row, kind == WBUF, NONE)
    t = _earliest(rch, rbank, faw_t, ch, cmd, bank)
    return t if t > clk + 1 else clk + 1


@njit(**JIT, forceinline=True)
def _oldest(bufs, counts, heads, ch, kind, open_row, rch, rbank, faw_t, clk, ref_bank, held,
            ready_only):
    """The oldest request of a buffer (FCFS), or the oldest ready one (FR-FCFS, any order).
    Returns (slot or -1, command, ready?, earliest ready cycle seen)."""
    mask = bufs.shape[3] - 1
    h = heads[ch, kind]
    best = -1
    best_cmd = -1
    best_t = INF
    best_arrive = INF
    earliest = INF
    for i in range(counts[ch, kind]):
        p = _slot(h, i, mask)
        key = bufs[ch, kind, F_KEY, p]
        bank = key & K_BANK
        cmd = -1 if bank == held else _next_command(open_row, ch, bank, key >> K_ROW_SHIFT,
                                                    key & K_WRITE != 0, ref_bank)
        t = _earliest(rch, rbank, faw_t, ch, cmd, bank)
        if t < earliest:
            earliest = t
        if ready_only and t > clk:
            continue
        arrive = bufs[ch, kind, F_ARRIVE, p]
        if arrive < best_arrive:
            best = np.int64(p)
            best_cmd = cmd
            best_t = t
            best_arrive = arrive
    return best, best_cmd, best_t <= clk, earliest


@njit(**JIT, forceinline=True)
def _try_channel(ch, clk, bufs, counts, heads, bank_queued, bank_hits, write_filter, scal, chan,
                 rch, rbank, faw, open_row, cmd_count, bank_cols, lat_hist, rule_lat, log,
                 completion, settings):
    """Channel ch's turn at CK cycle clk: refresh, then at most one command; sets its next try.
    `settings` is the controller's and timing's constants as one tuple (MemorySystem makes
    it)."""
    (caps, write_high, write_low, fcfs, closed_page, per_bank_refresh, n_bl, read_latency, n_faw,
     refresh_every, bg_shift, n_banks, every_cycle, hit_guard, refresh_postpone) = settings
    log_cap = log.shape[0]
    while clk >= chan[ch, C_NEXT_REF]:
        chan[ch, C_PENDING_REF] += 1
        chan[ch, C_NEXT_REF] += refresh_every
    ref_bank = -1
    held = -1  # the bank whose overdue refresh holds back its reads and writes
    if per_bank_refresh and chan[ch, C_PENDING_REF] > 0:
        ref_bank = chan[ch, C_REF_BANK]
        if chan[ch, C_PENDING_REF] > refresh_postpone:
            held = ref_bank
    faw_t = _faw_ready(faw, ch, n_faw)
    issued = False
    earliest = chan[ch, C_NEXT_REF]
    found = False
    bounded = False  # found with a bound on the other banks' next command (deep FR-FCFS)
    kind = -1
    idx = -1
    cmd = -1
    bank = -1
    bg = -1
    others = 0
    # 1. the active buffer
    if counts[ch, ABUF] > 0:
        if chan[ch, C_ABUF_T] > clk:
            if chan[ch, C_ABUF_T] < earliest:
                earliest = chan[ch, C_ABUF_T]
        else:
            idx, cmd, ready, e = _oldest(bufs, counts, heads, ch, ACTIVE_BUF, open_row, rch,
                                         rbank, faw_t, clk, ref_bank, NONE, not fcfs)
            if e < earliest:
                earliest = e
            if ready:
                found = True
                kind = ABUF
            else:
                chan[ch, C_ABUF_T] = e
    # 2. refresh
    blocked = False
    if not found and chan[ch, C_PENDING_REF] > 0:
        if per_bank_refresh:
            rb = chan[ch, C_REF_BANK]
            rcmd = PRE if open_row[ch, rb] >= 0 else REFPB
            t = _ready_at(rch, rbank, faw, ch, rcmd, rb, n_faw)
            if t <= clk and not (rcmd == PRE
                                 and _active_blocks(bufs, counts, heads, ch, rb)):
                _issue(rule_lat, rch, rbank, faw, open_row,
                       cmd_count, ch, rcmd, rb >> bg_shift, rb, NONE, clk, log,
                       scal, log_cap, n_banks, bg_shift)
                _rows_changed(bank_hits, chan, ch, rcmd, rb)
                issued = True
                if rcmd == REFPB:
                    chan[ch, C_PENDING_REF] -= 1
                    chan[ch, C_REF_BANK] = (rb + 1) % n_banks
            elif clk < t < earliest:  # (held back, it waits for an activated request's
                earliest = t          # column command, whose bound is in earliest)
        else:
            any_open = False
            for b in range(n_banks):
                if open_row[ch, b] >= 0:
                    any_open = True
                    break
            rcmd = PREA if any_open else REFAB
            t = _ready_at(rch, rbank, faw, ch, rcmd, NONE, n_faw)
            if t <= clk and not (rcmd == PREA
                                 and _active_blocks(bufs, counts, heads, ch, NONE)):
                _issue(rule_lat, rch, rbank, faw, open_row,
                       cmd_count, ch, rcmd, NONE, NONE, NONE, clk, log, scal, log_cap, n_banks,
                       bg_shift)
                _rows_changed(bank_hits, chan, ch, rcmd, NONE)
                issued = True
                if rcmd == REFAB:
                    chan[ch, C_PENDING_REF] -= 1
            elif clk < t < earliest:
                earliest = t
            blocked = True  # all-bank refresh holds back reads and writes
    # 3. reads or writes
    if not found and not issued and not blocked:
        nr = counts[ch, RBUF]
        nw = counts[ch, WBUF]
        if _mode_switches(chan[ch, C_WR_MODE], nr, nw, write_high, write_low):
            chan[ch, C_WR_MODE] = 1 - chan[ch, C_WR_MODE]
        k = WBUF if chan[ch, C_WR_MODE] == 1 else RBUF
        if counts[ch, k] > 0:
            if fcfs:
                idx, cmd, ready, e = _oldest(bufs, counts, heads, ch, k, open_row, rch,
                                             rbank, faw_t, clk, ref_bank, held, False)
            else:
                if counts[ch, k] >= SCAN_BELOW and bank_queued.shape[0] > 0:
                    idx, cmd, e, others = _first_ready(bufs, counts, heads, bank_queued,
                                                       bank_hits, chan, ch, k, open_row, rch,
                                                       rbank, faw_t, clk, ref_bank, held,
                                                       hit_guard)
                    bounded = idx >= 0
                else:
                    # (bounds where the controller is a deep one, its short spells included)
                    deep = bank_queued.shape[0] > 0
                    idx, cmd, e, others = _first_ready_scan(bufs, counts, heads, ch, k,
                                                            open_row, rch, rbank, faw_t, clk,
                                                            ref_bank, held, hit_guard, deep)
                    bounded = deep and idx >= 0
                ready = idx >= 0
            if e < earliest:
                earliest = e
            if ready:
                found = True
                kind = k
    # a precharge must not close a row an activated request is waiting for
    if found and cmd == PRE and kind != ABUF:
        if _active_blocks(bufs, counts, heads, ch, bufs[ch, kind, F_KEY, idx] & K_BANK):
            found = False  # until that request's column command (its bound is in earliest)
    if found and not issued:
        key = bufs[ch, kind, F_KEY, idx]
        bank = key & K_BANK
        bg = (key >> K_BG_SHIFT) & K_BG
        row = key >> K_ROW_SHIFT
        if not key & K_STAT:  # first command decides hit/miss/conflict
            bufs[ch, kind, F_KEY, idx] = key | K_STAT
            if cmd == RD or cmd == WR:
                chan[ch, C_HIT] += 1
            elif cmd == ACT:
                chan[ch, C_MISS] += 1
            else:
                chan[ch, C_CONFLICT] += 1
        final_cmd = cmd == RD or cmd == WR
        if final_cmd and closed_page and not _row_wanted(bufs, counts, heads, ch, bank, row,
                                                         kind, idx):
            cmd = RDA if cmd == RD else WRA
        _issue(rule_lat, rch, rbank, faw, open_row, cmd_count,
               ch, cmd, bg, bank, row, clk, log, scal, log_cap, n_banks, bg_shift)
        _rows_changed(bank_hits, chan, ch, cmd, bank)
        issued = True
        if final_cmd:
            chan[ch, C_BUSY] += n_bl
            bank_cols[ch, bank] += 1
            is_w = 1 if (cmd == WR or cmd == WRA) else 0
            if chan[ch, C_LAST_COL] >= 0 and chan[ch, C_LAST_COL] != is_w:
                chan[ch, C_RW_SWITCH] += 1
            chan[ch, C_LAST_COL] = is_w
            if chan[ch, C_LAST_BG] == bg:
                chan[ch, C_SAME_BG] += 1
            chan[ch, C_LAST_BG] = bg
            rid = bufs[ch, kind, F_ID, idx]
            if is_w:
                done = clk
                scal[S_DONE_WRITES] += 1
                _count_write(write_filter, ch, bufs[ch, kind, F_ADDR, idx], REMOVE)
            else:
                done = clk + read_latency
                lat = done - bufs[ch, kind, F_ARRIVE, idx]
                lat_hist[lat if lat < LAT_BINS - 1 else LAT_BINS - 1] += 1
                scal[S_DONE_READS] += 1
            if done > scal[S_LAST_DONE]:
                scal[S_LAST_DONE] = done
            _complete(completion, scal, rid, done)
            _leave(bufs, counts, heads, bank_queued, bank_hits, chan, open_row, ch, kind, idx,
                   bank, row)
            scal[S_QUEUED] -= 1
            if kind == ABUF:
                chan[ch, C_ABUF_T] = 0
        elif cmd == ACT and kind != ABUF and counts[ch, ABUF] < caps[ABUF]:
            # the activated request waits for its column command: the bound on the
            # active buffer takes its earliest cycle in
            col = WR if kind == WBUF else RD
            t = _earliest(rch, rbank, faw_t, ch, col, bank)
            if t < chan[ch, C_ABUF_T]:
                chan[ch, C_ABUF_T] = t
            _append(bufs, counts, heads, ch, ABUF, kind, idx)
            _leave(bufs, counts, heads, bank_queued, bank_hits, chan, open_row, ch, kind, idx,
                   bank, row)
    if issued and bounded and not _mode_switches(
            chan[ch, C_WR_MODE], counts[ch, RBUF], counts[ch, WBUF], write_high, write_low):
        # nothing can issue before the earliest of: the other banks' commands not ready (as
        # bounds only grow), those ready (by the channel's bounds now), the bank just served
        # (anew), the active buffer and the refresh
        col = WR if kind == WBUF else RD
        if others & 1 and rch[ch, col] < earliest:
            earliest = rch[ch, col]
        if others & 2:
            if rch[ch, PRE] < earliest:
                earliest = rch[ch, PRE]
            if rch[ch, ACT] < earliest:
                earliest = rch[ch, ACT]
        t = _bank_next(rch, rbank, faw, open_row, ch, kind, bank, n_faw)
        if t < earliest:
            earliest = t
        if counts[ch, ABUF] > 0 and chan[ch, C_ABUF_T] < earliest:
            earliest = chan[ch, C_ABUF_T]
        chan[ch, C_NEXT_TRY] = earliest if earliest > clk else clk + 1
    elif issued:
        chan[ch, C_NEXT_TRY] = clk + 1
    else:
        chan[ch, C_NEXT_TRY] = earliest if earliest > clk else clk + 1
    if every_cycle:  # the reference the skipping above must agree with (tests)
        chan[ch, C_NEXT_TRY] = clk + 1


@njit(**JIT, forceinline=True)
def _admit(bufs, counts, heads, bank_queued, bank_hits, write_filter, scal, chan, rch,
           rbank, faw, open_row, lat_hist, completion, settings, ch, addr, key, rid, clk):
    """Hand one request (its key, `_key`) to its channel at cycle clk: a read served from a
    queued write, or queued (the channel's next try moves up if the request can change what
    it does). False when its buffer is full."""
    caps, write_high, write_low, fcfs = settings[0], settings[1], settings[2], settings[3]
    n_faw, hit_guard = settings[8], settings[13]
    is_w = key & K_WRITE
    if is_w == 0 and _write_maybe_queued(write_filter, ch, addr) \
            and _forward(bufs, counts, heads, lat_hist, scal, completion, ch, addr, rid, clk):
        return True
    k = WBUF if is_w else RBUF
    n = counts[ch, k]
    if n >= caps[k]:
        return False
    mask = bufs.shape[3] - 1
    p = (heads[ch, k] + n) & mask
    bufs[ch, k, F_ID, p] = rid
    bufs[ch, k, F_ADDR, p] = addr
    bufs[ch, k, F_KEY, p] = key
    bufs[ch, k, F_ARRIVE, p] = clk
    counts[ch, k] = n + 1
    if is_w:
        _count_write(write_filter, ch, addr, ADD)
    bank = key & K_BANK
    row = key >> K_ROW_SHIFT
    _tally(bank_queued, bank_hits, chan, open_row, ch, k, bank, row, ADD)
    scal[S_QUEUED] += 1
    if chan[ch, C_NEXT_TRY] > clk + 1:
        wake = _arrival_wake(chan, counts, caps, bank_hits, open_row, rch, rbank, faw, ch, k,
                             bank, row, clk, fcfs, write_high, write_low, n_faw, hit_guard)
        if wake < chan[ch, C_NEXT_TRY]:
            chan[ch, C_NEXT_TRY] = wake
    return True


@njit(**JIT)
def run(bufs, counts, heads, bank_queued, bank_hits, write_filter, scal, chan, rch, rbank,
        faw, open_row, cmd_count, bank_cols,
        lat_hist, rule_lat, log,
        req_addr, req_key, req_arrive, req_ch, n_req, final, completion, settings, idle):
    """The in-order front end: requests handed over in trace order, the first that finds its
    buffer full holding back all behind it (as Ramulator's trace front end does). Advance the
    memory system until the chunk is fed (more input needed) or, when `final`, until every
    request has completed. Returns 1 when it needs the next chunk, 0 when done. `req_key`:
    each request's key (`pack_keys`). `settings`: see _try_channel. `idle`: a scratch row per
    channel for skipping idle periods, all channels at once (`idle_words`; none: never skip)."""
    caps = settings[0]
    n_ch = counts.shape[0]
    clk = scal[S_CLK]
    n_faw = settings[8]
    period = _idle_period(settings)
    probe_at = np.int64(-1)  # where the idle period being watched began (-1: none)
    while True:
        # ---- every channel idle until the next request: watch one period, skip the rest -------
        if idle.shape[1] > 0:
            far = req_arrive[scal[S_POS]] if scal[S_POS] < n_req else -1
            if scal[S_QUEUED] == 0 and far - clk > 3 * period:
                clk, probe_at = _idle_turn(idle, 0, clk, probe_at, far, period, chan, rch,
                                           rbank, faw, open_row, n_faw, cmd_count, scal)
            else:
                probe_at = -1
        # ---- channels ------------------------------------------------------------------------
        next_try = INF  # the earliest next try of any channel, kept as they are set
        for ch in range(n_ch):
            if chan[ch, C_NEXT_TRY] > clk:
                if chan[ch, C_NEXT_TRY] < next_try:
                    next_try = chan[ch, C_NEXT_TRY]
                continue
            _try_channel(ch, clk, bufs, counts, heads, bank_queued, bank_hits, write_filter,
                         scal, chan, rch, rbank, faw, open_row, cmd_count, bank_cols,
                         lat_hist, rule_lat, log, completion, settings)
            if chan[ch, C_NEXT_TRY] < next_try:
                next_try = chan[ch, C_NEXT_TRY]
        # ---- front end: in trace order, as many as the buffers take ----------------------------
        pos = scal[S_POS]
        while pos < n_req and req_arrive[pos] <= clk:
            ch = req_ch[pos]
            if not _admit(bufs, counts, heads, bank_queued, bank_hits, write_filter, scal, chan,
                          rch, rbank, faw, open_row, lat_hist, completion, settings, ch,
                          req_addr[pos], req_key[pos], scal[S_ID_BASE] + pos, clk):
                break
            if chan[ch, C_NEXT_TRY] < next_try:
                next_try = chan[ch, C_NEXT_TRY]
            pos += 1
        scal[S_POS] = pos
        # ---- done? next cycle with something to do ---------------------------------------------
        queued = scal[S_QUEUED]
        if pos >= n_req:
            if not final:
                scal[S_CLK] = clk
                return 1
            if queued == 0:
                scal[S_CLK] = clk
                return 0
        nxt = INF
        if pos < n_req:
            ch = req_ch[pos]
            k = WBUF if req_key[pos] & K_WRITE else RBUF
            # the next arrival, unless its full buffer holds it back; a read yet to arrive that
            # a queued write may serve is not held back (the filter can only say maybe: then
            # its arrival is one pass more)
            if counts[ch, k] < caps[k] or (
                    k == RBUF and req_arrive[pos] > clk
                    and _write_maybe_queued(write_filter, ch, req_addr[pos])):
                a = req_arrive[pos] if req_arrive[pos] > clk else clk + 1
                if a < nxt:
                    nxt = a
        # idle channels wake for their refreshes (their next try is the next refresh)
        if next_try < nxt:
            nxt = next_try
        if nxt <= clk:
            nxt = clk + 1
        clk = nxt



# An idle channel's refreshes repeat with the period `_idle_period`; once one period is seen to
# leave its state as it found it (moved on by the period), whole periods up to its next request
# are skipped, their commands counted (`_idle_probe`, `_idle_skip`). The state compared: every
# timing bound relative to the clock (a bound already passed counts as the clock: none can bind
# again), the nFAW ring likewise, open rows and the channel's slots; the scratch row holds it.
IDLE_TIME_SLOTS = (C_NEXT_REF, C_NEXT_TRY, C_ABUF_T)  # the channel slots that hold a cycle


def idle_words(n_banks: int) -> int:
    """The length of `run_channels`' idle scratch row (see `_idle_probe`)."""
    return N_CMD + N_CMD * n_banks + 5 + n_banks + N_CHANNEL_COUNTERS + N_CMD + 1


@njit(**JIT, forceinline=True)
def _idle_period(settings):
    """CK cycles after which an idle channel's refreshes repeat: a REFpb to every bank in
    turn, or one REFab."""
    per_bank_refresh, refresh_every, n_banks = settings[5], settings[9], settings[11]
    return refresh_every * n_banks if per_bank_refresh else refresh_every


@njit(**JIT, forceinline=True)
def _idle_word(idle, k, v, record):
    """One word of `_idle_probe`'s state: recorded, or compared (True when it matches)."""
    if record:
        idle[k] = v
        return True
    return idle[k] == v


@njit(**JIT, forceinline=True)
def _idle_probe(idle, ch, clk, chan, rch, rbank, faw, open_row, n_faw, cmd_count, scal, record):
    """Compare the channel's state at clk with the one recorded (True when it matches), or
    record it, with the command counts and the log's count the watched period starts from
    (`record`). Layout of `idle`: bounds, bank bounds, nFAW ring and its position, open rows,
    channel slots, command counts, the log's count."""
    same = True
    k = np.int64(0)  # (not a literal: _idle_word compiled once for it)
    for c in range(rch.shape[1]):
        same &= _idle_word(idle, k, max(rch[ch, c] - clk, 0), record)
        k += 1
    for c in range(rbank.shape[1]):
        for b in range(rbank.shape[2]):
            same &= _idle_word(idle, k, max(rbank[ch, c, b] - clk, 0), record)
            k += 1
    for j in range(4):
        same &= _idle_word(idle, k, max(faw[ch, j] - clk, -n_faw), record)
        k += 1
    same &= _idle_word(idle, k, faw[ch, 4] & 3, record)
    k += 1
    for b in range(open_row.shape[1]):
        same &= _idle_word(idle, k, open_row[ch, b], record)
        k += 1
    for j in range(N_CHANNEL_COUNTERS):
        v = 0 if j == C_CLK else chan[ch, j]
        for t in IDLE_TIME_SLOTS:
            if j == t:
                v = max(v - clk, 0)
        same &= _idle_word(idle, k, v, record)
        k += 1
    if record:
        for c in range(N_CMD):
            idle[k + c] = cmd_count[ch, c]
        idle[k + N_CMD] = scal[S_LOG_N]
    return same


@njit(**JIT, forceinline=True)
def _idle_skip(idle, ch, periods, period, chan, rch, rbank, faw, cmd_count):
    """Move the channel `periods` idle periods on: every cycle it holds later by as much, and
    the commands of the period just seen (recorded after the state in `idle`) counted that
    many times more. (The caller moves the log's count on: `_idle_logged`.)"""
    shift = periods * period
    for c in range(rch.shape[1]):
        rch[ch, c] += shift
        for b in range(rbank.shape[2]):
            rbank[ch, c, b] += shift
    for j in range(4):
        faw[ch, j] += shift
    for t in IDLE_TIME_SLOTS:
        chan[ch, t] += shift
    k = idle.shape[0] - N_CMD - 1
    # (the nFAW ring's count moves on by whole turns: the probe found its position repeat)
    faw[ch, 4] += periods * (cmd_count[ch, ACT] - idle[k + ACT]
                             + cmd_count[ch, REFPB] - idle[k + REFPB])
    for c in range(N_CMD):
        cmd_count[ch, c] += periods * (cmd_count[ch, c] - idle[k + c])


@njit(**JIT, forceinline=True)
def _idle_logged(idle, scal, periods, channels):
    """After `channels` channels skipped `periods` periods: the log's count moved on by the
    commands the watched period added (recorded by `_idle_probe` in idle's last word)."""
    scal[S_LOG_N] += periods * (scal[S_LOG_N] - idle[idle.shape[0] - 1])
    scal[S_IDLE_SKIPPED] += periods * channels


@njit(**JIT, forceinline=True)
def _idle_all(idle, first, clk, chan, rch, rbank, faw, open_row, n_faw, cmd_count, scal,
              record):
    """`_idle_probe` for the channels watched together (row i of `idle` is channel
    first + i's): record them all, or say whether all match."""
    for i in range(idle.shape[0]):
        if not _idle_probe(idle[i], first + i, clk, chan, rch, rbank, faw, open_row, n_faw,
                           cmd_count, scal, record):
            return False
    return True


@njit(**JIT, forceinline=True)
def _idle_turn(idle, first, clk, probe_at, far, period, chan, rch, rbank, faw, open_row, n_faw,
               cmd_count, scal):
    """Channels idle until `far` (row i of `idle` is channel first + i's: one channel of a
    per-channel front end, or every channel of the in-order one, which share a clock): one
    period after the watch began (`probe_at`), if their state repeated, skip the whole periods
    up to one before `far`; else start watching a period. Returns (clk, probe_at)."""
    if probe_at >= 0 and clk == probe_at + period and _idle_all(
            idle, first, clk, chan, rch, rbank, faw, open_row, n_faw, cmd_count, scal, COMPARE):
        periods = (far - clk) // period - 1
        for i in range(idle.shape[0]):
            _idle_skip(idle[i], first + i, periods, period, chan, rch, rbank, faw, cmd_count)
        _idle_logged(idle[0], scal, periods, idle.shape[0])
        return clk + periods * period, np.int64(-1)
    if probe_at < 0 or clk >= probe_at + period:
        _idle_all(idle, first, clk, chan, rch, rbank, faw, open_row, n_faw, cmd_count, scal,
                  RECORD)
        return clk, clk
    return clk, probe_at


@njit(**JIT, nogil=True)
def run_channels(channels, bufs, counts, heads, bank_queued, bank_hits, write_filter, scal, chan,
                 rch, rbank, faw, open_row, cmd_count, bank_cols, lat_hist, rule_lat, log,
                 reqs, starts, final, until, completion, settings, idle):
    """Per-channel front ends: each channel takes its own requests (rows starts[ch] to
    starts[ch + 1] of `reqs`, from group_by_channel) as its buffers accept them, on its own clock
    (chan[ch, C_CLK]). Nothing couples channels, so each runs alone to the end of the chunk:
    every request handed over, or with `final` every request completed and the clock past
    `until` (so that its refreshes keep time with the other channels'). Threads can share the
    channels out: `scal` and `lat_hist` are the caller's own, and a request's completion is
    written only by its channel's thread. `settings`: see _try_channel. `idle`: the caller's
    scratch row for skipping idle periods, as a one-row array (`idle_words`; no words: never
    skip)."""
    caps = settings[0]
    n_faw = settings[8]
    period = _idle_period(settings)
    for ch in channels:
        clk = chan[ch, C_CLK]
        pos = starts[ch]
        end = starts[ch + 1]
        blocked = 0  # the buffer kind + 1 that holds the next request back, 0 when none
        probe_at = np.int64(-1)  # where the idle period being watched began (-1: none)
        while True:
            if idle.shape[1] > 0:
                # the channel's next request, or the cycle it must reach: far enough ahead,
                # an idle channel watches one period and skips the whole ones that follow
                far = reqs[pos, G_ARRIVE] if pos < end else (until if final else -1)
                if (far - clk > 3 * period and not blocked
                        and counts[ch, RBUF] + counts[ch, WBUF] + counts[ch, ABUF] == 0):
                    clk, probe_at = _idle_turn(idle, ch, clk, probe_at, far, period, chan,
                                               rch, rbank, faw, open_row, n_faw, cmd_count,
                                               scal)
                else:
                    probe_at = -1
            if chan[ch, C_NEXT_TRY] <= clk:
                _try_channel(ch, clk, bufs, counts, heads, bank_queued, bank_hits, write_filter,
                             scal, chan, rch, rbank, faw, open_row, cmd_count, bank_cols,
                             lat_hist, rule_lat, log, completion, settings)
            # a request held back by its full buffer stays so until a request leaves it (a
            # read the write buffer could serve would have been served)
            if blocked and counts[ch, blocked - 1] < caps[blocked - 1]:
                blocked = 0
            while not blocked and pos < end and reqs[pos, G_ARRIVE] <= clk:
                if not _admit(bufs, counts, heads, bank_queued, bank_hits, write_filter, scal,
                              chan, rch, rbank, faw, open_row, lat_hist, completion,
                              settings, ch, reqs[pos, G_ADDR], reqs[pos, G_KEY],
                              reqs[pos, G_ID], clk):
                    blocked = (WBUF if reqs[pos, G_KEY] & K_WRITE else RBUF) + 1
                    break
                pos += 1
            if pos >= end and (not final or (
                    counts[ch, RBUF] + counts[ch, WBUF] + counts[ch, ABUF] == 0
                    and chan[ch, C_NEXT_TRY] > until)):
                break
            nxt = chan[ch, C_NEXT_TRY]  # after refreshes when the channel has nothing queued
            if pos < end and not blocked and reqs[pos, G_ARRIVE] < nxt:
                nxt = reqs[pos, G_ARRIVE]
            clk = nxt if nxt > clk else clk + 1
        chan[ch, C_CLK] = clk


@njit(**JIT, nogil=True)
def pack_keys(req_write, req_bg, req_bank, req_row, bg_shift, keys):
    """Each request's key (`_key`), the bank (within its group in `req_bank`) as the channel's
    bank index: what the in-order front end reads a request by."""
    for i in range(keys.shape[0]):
        keys[i] = _key(req_row[i], req_write[i], req_bg[i], req_bank[i], bg_shift)


@njit(**JIT, nogil=True)
def group_by_channel(lo, hi, req_ch, req_addr, req_write, req_arrive, req_bg, req_bank, req_row,
                     bg_shift, id_base, grouped, starts, fill):
    """The requests of channels lo to hi - 1 grouped by channel, each group in trace order (a
    counting sort, its counts given): row j of `grouped` holds request fields (G_ID, G_ADDR,
    G_KEY, G_ARRIVE), channel ch's in rows starts[ch] to starts[ch + 1], the key with the bank
    (within its group in `req_bank`) as the channel's bank index. `fill` is scratch, one per
    channel. Grouped, each channel reads its requests in one sweep rather than every
    sixteenth; threads each group their own channels."""
    for ch in range(lo, hi):
        fill[ch] = starts[ch]
    for i in range(req_ch.shape[0]):
        ch = req_ch[i]
        if ch < lo or ch >= hi:
            continue
        q = fill[ch]
        grouped[q, G_ID] = id_base + i
        grouped[q, G_ADDR] = req_addr[i]
        grouped[q, G_KEY] = _key(req_row[i], req_write[i], req_bg[i], req_bank[i], bg_shift)
        grouped[q, G_ARRIVE] = req_arrive[i]
        fill[ch] = q + 1
