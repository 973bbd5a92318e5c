"""Running a sweep's points: in this process, on a local process pool, or on a Dask cluster.

Each finished point is appended to DIR/points.jsonl at once (flushed and synced), so an
interrupted sweep loses nothing. A rerun reuses a stored point only when its result would be
the same: the point's `key` digests everything that decides it (the workload's and the card's
content as loaded, the fidelity and options, the simulator's code); any other stored point,
and one that failed, is computed again.

Points whose memory systems are the same (they vary the L2, compute or price) measure the same
DRAM windows: each process keeps those results (replay's `dram_memo`; results are the same with
or without it), and the local pool hands such points to one worker, one group at a time.
Each process also generates each workload's trace (and its placement) once, for all points.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import signal
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing.managers import SyncManager
from pathlib import Path
from typing import Any

from simulator import resources, version
from simulator.config.hardware import Hardware
from simulator.config.host import Host
from simulator.config.organization import organization
from simulator.config.workload import WorkloadSpec
from simulator.dram.system import configuration, engine_threads, set_engine_threads
from simulator.errors import InputError
from simulator.sweep.spec import Point, SweepSpec
from simulator.threads import usable_cpus
from simulator.units import GB

_DRAM_MEMO: dict = {}  # this process's sampled DRAM results, for the points it runs next
_STEPS: dict = {}      # this process's workloads, generated once: (workload, file stamp) -> Step
_RUNS: dict = {}       # this process's steps, replayed once: (Step, card, fidelity) -> result


def run_point(workload: str, hardware: Hardware, fidelity: str, host: Host | None = None,
              data_settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The figures a sweep keeps of one step (module level, so workers can unpickle it); with a
    host, the input pipeline's too (points that differ only in the input pipeline share the
    GPU's step, replayed once per process)."""
    from simulator.pipeline import analyze

    made = _step(workload)   # (the same object until the workload's file changes)
    run_key = (made, hardware.content_digest, fidelity)
    r = _RUNS.get(run_key) if host is not None else None
    if r is None:
        r = analyze(made, hardware, fidelity=fidelity, dram_memo=_DRAM_MEMO)
        if host is not None:   # (only points with a host can share a step)
            if len(_RUNS) >= 32:
                _RUNS.clear()
            _RUNS[run_key] = r
    est = r.estimate
    step = est.step_time_s
    dram_bytes = sum(o.bytes_to_dram for o in est.ops)
    price = hardware.price_usd
    row = {
        "step_time_s": step,
        "analytic_step_time_s": est.analytic.step_time_s,
        "error_bound_s": est.replay.error_bound_s if est.replay else 0.0,
        "achieved_bandwidth_GBps": dram_bytes / step / GB if step else 0.0,
        "peak_bandwidth_GBps": hardware.memory.peak_bandwidth_GBps,
        "memory_bound_share": est.memory_bound_time_s / step if step else 0.0,
        "bound": est.bound,
        "peak_memory_bytes": r.memory.peak_bytes,
        "capacity_bytes": hardware.memory.capacity_bytes,
        "usable_bytes": hardware.usable_bytes,
        "fits": r.fits,
        "reserved_memory_bytes": r.placement.reserved_peak,
        "reserve_fits": r.reserve_fits,
        "best_change": est.replay.bottlenecks.best_change if est.replay else None,
        "price_usd": price,
        "steps_per_hour_per_kusd": 3600 / step / (price / 1000) if price and step else None,
    }
    if host is not None:
        from simulator.sweep.feed_params import apply_data

        spec = apply_data(workload, data_settings, "sweep point") if data_settings \
            else made.spec
        row.update(_feed_row(spec, host, step))
    return row


# the input pipeline's figures a sweep row keeps, by their name in run --json's input_pipeline
_FEED_ROW = {"input_bound": "bound", "input_bottleneck": "bottleneck",
             "stall_s_per_step": "stall_s_per_step", "gpu_wait_share": "gpu_wait_share",
             "samples_per_s_needed": "samples_per_s_needed",
             "samples_per_s_supplied": "samples_per_s_supplied",
             "first_epoch_s": "first_epoch_s", "steady_epoch_s": "steady_epoch_s",
             "input_best_change": "best_single_change"}


def _feed_row(spec: WorkloadSpec, host: Host, step_time_s: float) -> dict[str, Any]:
    from simulator.feed.analysis import analyze_feed
    from simulator.report.feed_report import feed_doc

    f = analyze_feed(spec, host, step_time_s)
    doc = feed_doc(f)
    return {**{k: doc[v] for k, v in _FEED_ROW.items()},
            "effective_step_time_s": f.timeline.period_s}


def _step(workload: str):
    """The workload's trace, placement and memory profile, made once per process (a Dask
    worker outlives a sweep: an edited workload file is generated again). Keyed by the file's
    stat, not its digest, which would read a large trace file again for every point."""
    from simulator.pipeline import Step

    try:
        st = resources.resolve("workloads", workload).stat()
        key = (workload, st.st_mtime_ns, st.st_size)
    except (OSError, InputError):
        return Step(workload)  # reading it again says what is wrong
    if key not in _STEPS:
        if len(_STEPS) >= 16:
            _STEPS.clear()
        _STEPS[key] = Step(workload)
    return _STEPS[key]


# How run_point runs each point (the options of `analyze` it sets): part of a point's key
POINT_OPTIONS = {"share_shapes": True}


def workload_digest(workload: str) -> str:
    """SHA-256 of the workload file as read (a shipped name: its shipped file); a file that
    cannot be read digests as its error, so the point runs again and reports it."""
    try:
        return hashlib.sha256(resources.resolve("workloads", workload).read_bytes()).hexdigest()
    except (OSError, InputError) as exc:
        return f"unreadable: {exc}"


def point_key(point: Point, fidelity: str, workload_digests: dict[str, str]) -> str:
    """What decides a point's result: a stored point is reused only under the same key."""
    doc = json.dumps({"workload": workload_digests[point.workload],
                      "hardware": point.hardware.content_digest, "fidelity": fidelity,
                      "host": point.host.content_digest if point.host else None,
                      "data": point.data_settings,
                      "options": POINT_OPTIONS, "simulator": version.model_digest()},
                     sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()


def _row(point: Point, key: str, result: dict[str, Any] | None,
         error: str | None) -> dict[str, Any]:
    return {"id": point.id, "key": key, "workload": point.workload,
            "hardware": point.hardware.name,
            **({"host": point.host.name} if point.host else {}),
            **{f"param.{k}": v for k, v in point.settings.items()},
            **(result or {}), "error": error}


@dataclass
class Reuse:
    """How a run of a sweep treated its points: reused as stored, or computed (never stored,
    stored from other inputs, a fidelity or a simulator version, or failed before)."""

    reused: int = 0
    new: int = 0
    stale: int = 0
    failed_before: int = 0

    @property
    def computed(self) -> int:
        return self.new + self.stale + self.failed_before

    def describe(self) -> str:
        why = [f"{n} {what}" for n, what in ((self.new, "new"), (self.stale, "stale: "
               "stored from another workload, card, fidelity or simulator version"),
               (self.failed_before, "failed before")) if n]
        return (f"{self.reused} point{'s' * (self.reused != 1)} reused, {self.computed} "
                f"computed" + (f" ({'; '.join(why)})" if why else ""))


class PointStore:
    """DIR/points.jsonl: one JSON line per finished point, appended as each one ends."""

    def __init__(self, path: Path):
        self.path = path
        self.rows: dict[str, dict] = {}
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                if n == len(lines):
                    continue  # the last line, cut short by an interruption: that point reruns
                raise InputError("not a sweep results line", file=f"{path}:{n}") from None
            self.rows[row["id"]] = row

    def status(self, point: Point, key: str) -> str:
        """'reused' (stored under this key, without error), 'new', 'stale' or 'failed_before'."""
        row = self.rows.get(point.id)
        if row is None:
            return "new"
        if row.get("key") != key:
            return "stale"
        return "failed_before" if row.get("error") is not None else "reused"

    def add(self, row: dict) -> None:
        self.rows[row["id"]] = row
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())


def _memory_groups(todo: list[Point]) -> list[list[Point]]:
    """The points in groups that share a memory system, slowest memory first: those replay
    the most DRAM-bound ops, and the longest tasks going first leave the workers the least
    idle time at the end."""
    groups: dict[str, list[Point]] = {}
    for p in todo:
        m = p.hardware.memory
        # the key under which `sampled` keeps its DRAM results (analytic-only HBM: the spec)
        key = (configuration(organization(m, p.hardware.path), m.timing,
                             p.hardware.controller)
               if m.replayable else repr(m))
        groups.setdefault(key, []).append(p)
    return sorted(groups.values(), key=lambda g: g[0].hardware.memory.peak_bandwidth_GBps)


def _run_group(points: list[Point], fidelity: str, results) -> None:
    """A worker's task: the group's points one after another, each reported as it ends."""
    for p in points:
        results.put((p.id, *_guarded(p, fidelity)))


def _ignore_interrupts() -> None:
    """The Manager's process leaves Ctrl-C to the sweep's own process, which shuts it down."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _quit_quietly(_signum, _frame) -> None:
    """A worker on Ctrl-C: ends at once, without a traceback of its own (the sweep's process
    says where the finished points are; a worker has none that are not stored)."""
    os._exit(128 + signal.SIGINT)


def worker_start(threads: int) -> None:
    """A worker process's start: Ctrl-C ends it quietly, and its GDDR6 engine runs on
    `threads` of the CPUs the workers share out."""
    signal.signal(signal.SIGINT, _quit_quietly)
    set_engine_threads(threads)


def _manager() -> SyncManager:
    manager = SyncManager()
    manager.start(_ignore_interrupts)
    return manager


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now: Ctrl-C sent to the sweep's
    process alone would otherwise wait for every running group to finish."""
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        proc.terminate()


def _local(todo: list[Point], fidelity: str, workers: int
           ) -> Iterator[tuple[Point, dict | None, str | None]]:
    groups = _memory_groups(todo)
    if workers <= 1:
        for group in groups:
            for p in group:
                yield p, *_guarded(p, fidelity)
        return
    by_id = {p.id: p for p in todo}
    with _manager() as manager, \
            ProcessPoolExecutor(max_workers=workers, initializer=worker_start,
                                initargs=(max(1, engine_threads() // workers),)) as pool:
        results = manager.Queue()
        futures = {pool.submit(_run_group, g, fidelity, results): g for g in groups}
        try:
            yield from _collect(results, futures, by_id)
        except BaseException:
            _stop(pool)
            raise


def _collect(results, futures: dict, by_id: dict[str, Point]
             ) -> Iterator[tuple[Point, dict | None, str | None]]:
    """Each point's result as its worker reports it; a dead worker's points as failed."""
    while by_id:
        try:
            pid, result, error = results.get(timeout=0.5)
        except queue.Empty:
            for fut, group in futures.items():  # a worker that died takes its group
                exc = fut.exception() if fut.done() else None
                for p in group if exc else ():
                    if by_id.pop(p.id, None):
                        yield p, None, _message(exc)
            continue
        yield by_id.pop(pid), result, error


def _dask(todo: list[Point], fidelity: str, scheduler: str
          ) -> Iterator[tuple[Point, dict | None, str | None]]:
    try:
        from dask.distributed import Client
        from dask.distributed import as_completed as dask_completed
    except ImportError:
        raise InputError("--scheduler needs Dask: pip install 'gddr6-roofline-sim[dask]'"
                         ) from None
    try:
        client = Client(scheduler, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise InputError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    with client:
        futures = {client.submit(run_point, p.workload, p.hardware, fidelity, p.host,
                                 p.data_settings, pure=False): p for p in todo}
        for fut in dask_completed(list(futures)):
            exc = fut.exception()
            yield futures[fut], (None if exc else fut.result()), _message(exc)


def _guarded(p: Point, fidelity: str) -> tuple[dict | None, str | None]:
    try:
        return run_point(p.workload, p.hardware, fidelity, p.host, p.data_settings), None
    except Exception as exc:  # noqa: BLE001 - a failing point is reported, the rest go on
        return None, _message(exc)


def _message(exc: BaseException | None) -> str | None:
    if exc is None:
        return None
    if isinstance(exc, InputError):
        return str(exc)
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return last


def run_sweep(spec: SweepSpec, out: Path, workers: int | None = None,
              scheduler: str | None = None,
              on_point: Callable[[dict], None] | None = None,
              on_plan: Callable[[Reuse], None] | None = None) -> list[dict]:
    """Every point of the sweep, reusing those in out/points.jsonl stored under the same key;
    returns all rows in grid order. `on_plan` is told, before anything runs, how many points
    are reused and why the others are computed."""
    store = PointStore(out / "points.jsonl")  # the folder appears with the first point
    points = spec.points()
    digests = {w: workload_digest(w) for w in spec.workloads}
    keys = {p.id: point_key(p, spec.fidelity, digests) for p in points}
    reuse = Reuse()
    todo = []
    for p in points:
        status = store.status(p, keys[p.id])
        setattr(reuse, status, getattr(reuse, status) + 1)
        if status != "reused":
            todo.append(p)
    if on_plan:
        on_plan(reuse)
    workers = workers or usable_cpus()
    stream = _dask(todo, spec.fidelity, scheduler) if scheduler else _local(
        todo, spec.fidelity, min(workers, max(len(todo), 1)))
    for point, result, error in stream:
        row = _row(point, keys[point.id], result, error)
        store.add(row)
        if on_point:
            on_point(row)
    return [store.rows[p.id] for p in points]
