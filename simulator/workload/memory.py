"""Live device memory over the step, from tensor lifetimes.

A tensor is allocated at the first op that touches it (parameters, optimizer state and the batch
exist before the step) and freed after the last op that touches it, unless something holds it:
parameters, their gradients and optimizer state persist; the loop holds the logits and the loss;
`Trace.releases` names later release points. This is what PyTorch frees by reference counting,
counted as storage bytes without allocator rounding or caching (the reference figures' definition).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.workload.trace import PERSISTENT, Category, Phase, Trace

CATEGORIES = tuple(Category)


@dataclass(frozen=True)
class MemoryProfile:
    """Live device memory over a step: the peak, where it falls, and what is live by category
    at every op boundary (live tensor storage, no allocator rounding)."""

    peak_bytes: int                 # largest live total, outputs of the peak op included
    peak_op: int                    # index of the op at which it occurs
    peak_phase: Phase
    at_peak: dict[Category, int]    # live bytes by category at the peak
    live_after: np.ndarray          # (ops, categories): bytes live after each op completes
    during: np.ndarray              # (ops, categories): bytes live while each op runs
    start_bytes: int                # live before the first op (parameters, state, batch)
    # (ops,): bytes live while each op runs of the temporaries the optimizer step allocates
    # (its parameter-sized scratch): sharded with the optimizer state, as ZeRO's ranks each
    # step the optimizer on their own partition
    optimizer_scratch: np.ndarray | None = None

    def peak_in(self, phase: Phase, trace: Trace) -> int:
        idx = [op.index for op in trace.ops if op.phase == phase]
        return int(self.during[idx].sum(axis=1).max()) if idx else 0

    def peak_scaled(self, factors: dict[Category, float], optimizer_scratch: float = 1.0
                    ) -> int:
        """The peak if every category's bytes were scaled (sharding state over GPUs, say),
        and the optimizer step's own temporaries by `optimizer_scratch`."""
        if not len(self.during):
            return 0
        scale = np.array([factors.get(c, 1.0) for c in CATEGORIES])
        live = (self.during * scale).sum(axis=1)
        if self.optimizer_scratch is not None:
            live -= (1 - optimizer_scratch) * factors.get(Category.TEMPORARY, 1.0) \
                * self.optimizer_scratch
        return int(live.max())


def lifetimes(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(alloc_at, free_after) op indices per tensor id; -1 means 'before the step'."""
    n_ops = len(trace.ops)
    n = len(trace.tensors)
    first = np.full(n, n_ops, dtype=np.int64)
    last = np.full(n, -1, dtype=np.int64)
    for op in trace.ops:
        for acc in op.reads + op.writes:
            tid = acc.tensor.storage.id  # a view keeps its storage alive
            first[tid] = min(first[tid], op.index)
            last[tid] = max(last[tid], op.index)
    for tid, at in trace.releases.items():
        tid = trace.tensors[tid].storage.id
        last[tid] = max(last[tid], at)
    held = set(trace.held_gradients)
    for t in trace.tensors:
        root = t.storage.id
        if t.category in (Category.PARAMETER, Category.OPTIMIZER_STATE, Category.INPUT,
                          Category.BUFFER) or t.id in held:
            first[root] = -1
        if t.category in PERSISTENT or t.retained:
            last[root] = n_ops  # never freed within the step
    for t in trace.tensors:
        if t.alias_of is not None:  # counted once, as its storage
            first[t.id] = n_ops
    return first, last


def profile(trace: Trace) -> MemoryProfile:
    n_ops = len(trace.ops)
    first, last = lifetimes(trace)
    used = first < n_ops  # tensors no op touches are never allocated (a parameter always is)
    nbytes = np.array([t.nbytes for t in trace.tensors], dtype=np.int64)
    cat_index = {c: i for i, c in enumerate(CATEGORIES)}
    cats = np.array([cat_index[t.category] for t in trace.tensors], dtype=np.int64)

    # one column per category, and a last one for the optimizer step's own temporaries
    # (counted in temporaries too): the live bytes of each, before and while each op runs
    scratch_col = len(CATEGORIES)
    in_optimizer = np.array([op.phase == Phase.OPTIMIZER for op in trace.ops] + [False])
    scratch = used & (cats == cat_index[Category.TEMPORARY]) & in_optimizer[first]
    freed = used & (last < n_ops)
    alloc = np.zeros((n_ops + 1, scratch_col + 1), dtype=np.int64)   # row 0: before the step
    free = np.zeros((n_ops, scratch_col + 1), dtype=np.int64)
    for sel, col in ((used, cats), (scratch, np.full_like(cats, scratch_col))):
        np.add.at(alloc, (first[sel] + 1, col[sel]), nbytes[sel])
        gone = sel & freed
        np.add.at(free, (last[gone], col[gone]), nbytes[gone])
    cum_alloc = np.cumsum(alloc, axis=0)
    cum_free = np.cumsum(free, axis=0)
    during_all = cum_alloc[1:] - np.vstack([np.zeros((1, scratch_col + 1), np.int64),
                                            cum_free[:-1]])
    during, live_after = during_all[:, :scratch_col], (cum_alloc[1:] - cum_free)[:, :scratch_col]
    start_bytes = int(cum_alloc[0, :scratch_col].sum())
    totals = during.sum(axis=1)
    peak_op = int(np.argmax(totals)) if n_ops else 0
    return MemoryProfile(
        peak_bytes=int(totals[peak_op]) if n_ops else start_bytes,
        peak_op=peak_op,
        peak_phase=trace.ops[peak_op].phase if n_ops else Phase.FORWARD,
        at_peak={c: int(during[peak_op, i]) for i, c in enumerate(CATEGORIES)} if n_ops else {},
        live_after=live_after,
        during=during,
        start_bytes=start_bytes,
        optimizer_scratch=during_all[:, scratch_col],
    )
