"""Command line: `python -m simulator SUBCOMMAND ...`. Bad input exits 2 with one clear line."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from simulator.config.hardware import hardware_names, load_hardware
from simulator.config.workload import load_workload, workload_names
from simulator.errors import InputError, check_folder
from simulator.estimate import FIDELITIES
from simulator.units import GiB, fmt_bytes, fmt_flops

EXIT_BAD_INPUT = 2
EXIT_IO = 1  # the input was fine; writing the output failed
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as shells report it


def _print_json(doc) -> None:
    json.dump(doc, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def cmd_run(args: argparse.Namespace) -> int:
    from simulator.pipeline import analyze, default_fidelity
    from simulator.report.json_report import run_doc
    from simulator.report.text import run_report

    hw = load_hardware(args.hardware)
    fidelity = args.fidelity or default_fidelity(hw)
    if args.own_windows and fidelity != "sampled":
        raise InputError(f"--own-windows sets how the sampled replay measures ops; with "
                         f"--fidelity {fidelity} it would change nothing: expected --fidelity "
                         "sampled, or no --own-windows")
    host = None
    if args.host:
        from simulator.config.host import load_host

        host = load_host(args.host)
    result = analyze(args.workload, hw, fidelity=fidelity,
                     progress=sys.stderr.isatty(), share_shapes=not args.own_windows, host=host)
    if args.out:
        from simulator.report.outputs import write_outputs

        written = write_outputs(result, Path(args.out))
        if not args.json:
            print(f"wrote {len(written)} files to {args.out}: "
                  + ", ".join(p.name for p in written), file=sys.stderr)
    if args.json:
        _print_json(run_doc(result))
    else:
        print(run_report(result, top=args.top))
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from simulator.report.outputs import file_label
    from simulator.sweep import report as sweep_report
    from simulator.sweep.execute import run_sweep
    from simulator.sweep.spec import build, load_sweep, parse_vary

    cards = (args.hardware or "t4").split(",")
    hosts = args.host.split(",") if args.host else []
    if args.vary or len(cards) > 1 or len(hosts) > 1:
        workloads = args.target.split(",")
        name = "-".join(file_label(x) for x in workloads + cards + hosts)
        spec = build(name, cards if len(cards) > 1 else cards[0], workloads,
                     parse_vary(args.vary or []), args.fidelity, "command line",
                     hosts if len(hosts) > 1 else hosts[0] if hosts else None)
    else:
        if args.hardware or args.host:
            _one_card_nothing_varied(args.target)
        spec = load_sweep(Path(args.target), args.fidelity)
    out = Path(args.out or f"sweep-{spec.name}")
    check_folder(out, f"--out {out}")
    args.interrupted_note = (f": the points finished so far are kept in {out}/points.jsonl; "
                             "the same command goes on from there")
    points = len(spec.points())
    print(f"sweep {spec.name}: {points} points ({len(spec.workloads)} workloads x "
          f"{points // len(spec.workloads)} settings), {spec.fidelity} fidelity, "
          f"results in {out}/", file=sys.stderr)
    bar = None
    if sys.stderr.isatty():
        from tqdm import tqdm
        bar = tqdm(total=points, unit="point", delay=2.0, leave=False)
    rows = run_sweep(spec, out, workers=args.workers, scheduler=args.scheduler,
                     on_point=(lambda _row: bar.update()) if bar else None,
                     on_plan=lambda reuse: _planned(reuse, out, bar))
    if bar:
        bar.close()
    workloads = list(spec.workloads)
    extra = {"hardware": spec.hardware, **({"host": spec.host} if spec.host else {}),
             "fidelity": spec.fidelity}
    written = sweep_report.write(out, spec.name, extra, rows, spec.axes, workloads)
    failed = [r for r in rows if r.get("error")]
    if args.json:
        _print_json(json.loads((out / f"{spec.name}.json").read_text()))
    else:
        print(sweep_report.table(rows, spec.axes))
        for line in ["", *sweep_report.sensitivity_lines(rows, spec.axes, workloads)]:
            print(line)
        print(f"\nwrote {len(written)} files to {out}/ (points.jsonl, CSV, JSON, plots, HTML)")
    if failed:
        print(f"{len(failed)} of {len(rows)} points failed; rerun to retry them",
              file=sys.stderr)
        return 1
    return 0


def _one_card_nothing_varied(target: str) -> None:
    """`sweep TARGET --hardware CARD` (or `--host HOST`) without --vary: say what is wrong with
    it (a sweep file names its own hardware and host; a workload, unknown or not, is named as
    such)."""
    from simulator.config.loader import read_json

    path = Path(target)
    if path.is_file() and target.endswith(".json"):
        doc = read_json(path)
        if isinstance(doc, dict) and "workloads" in doc:
            raise InputError("--hardware and --host go with --vary or name several cards or "
                             "hosts; a sweep file names its own", file=target)
    load_workload(target)  # an unknown or broken workload says so
    raise InputError(f"nothing to vary for {target} on one card: expected --vary NAME=V1,V2,... "
                     "or several cards or hosts to compare (--hardware t4,l4, --host "
                     "hdd-server,nvme-workstation)")


def _planned(reuse, out: Path, bar) -> None:
    """Say which stored points a sweep reuses and why it computes the others."""
    print(f"{out}/points.jsonl: {reuse.describe()}", file=sys.stderr)
    if bar:
        bar.update(reuse.reused)


def cmd_hardware_list(args: argparse.Namespace) -> int:
    from simulator.report.json_report import hardware_doc
    from simulator.report.text import table

    hws = [load_hardware(n) for n in hardware_names()]
    if args.json:
        _print_json([hardware_doc(h) for h in hws])
        return 0
    rows = [["name", "memory", "bus", "Gb/s/pin", "peak GB/s", "channels", "CK MHz", "WCK MHz",
             "capacity", "fp32 TFLOP/s", "ridge fp32", "ridge fp16/bf16 tensor"]]
    for h in hws:
        m = h.memory
        ridge = h.ridge_points()
        half = ridge.get("fp16_tensor") or ridge.get("bf16_tensor")
        rows.append([h.name, m.type, f"{m.bus_width_bits}-bit", f"{m.data_rate_gbps:g}",
                     f"{m.peak_bandwidth_GBps:.1f}", str(m.channels),
                     f"{m.ck_GHz * 1e3:.1f}" if m.ck_GHz else "-",
                     f"{m.wck_GHz * 1e3:.1f}" if m.wck_GHz else "-",
                     f"{m.capacity_bytes / GiB:.0f} GiB", f"{h.peak_tflops['fp32']:g}",
                     f"{ridge['fp32']:.1f}", f"{half:.1f}" if half else "-"])
    print("\n".join(table(rows, "<<" + ">" * 10)))
    print("\nridge points in FLOP per DRAM byte; channels are 16-bit for GDDR6; "
          "CK = data rate / 8, WCK = data rate / 4 (QDR)")
    return 0


def _show(item, as_json: bool, doc, details) -> int:
    """A `NAME show` command: the item as its JSON document, or in words."""
    if as_json:
        _print_json(doc(item))
    else:
        print(details(item))
    return 0


def cmd_hardware_show(args: argparse.Namespace) -> int:
    from simulator.report.json_report import hardware_doc
    from simulator.report.text import hardware_details

    return _show(load_hardware(args.hardware), args.json, hardware_doc, hardware_details)


def cmd_hosts_list(args: argparse.Namespace) -> int:
    from simulator.config.host import host_names, load_host
    from simulator.report.feed_report import host_doc, source_line
    from simulator.report.text import table

    hosts = [load_host(n) for n in host_names()]
    if args.json:
        _print_json([host_doc(h) for h in hosts])
        return 0
    rows = [["name", "cores", "RAM", "reads from", "PCIe (pinned GB/s)"]]
    rows += [[h.name, str(h.cpu.cores), f"{h.ram_bytes / GiB:g} GiB", source_line(h),
              f"{h.pcie.generation}.0 x{h.pcie.lanes} ({h.pcie.copy_GBps(True):.1f})"]
             for h in hosts]
    print("\n".join(table(rows, "<><<<")))
    return 0


def cmd_hosts_show(args: argparse.Namespace) -> int:
    from simulator.config.host import load_host
    from simulator.report.feed_report import host_details, host_doc

    return _show(load_host(args.host), args.json, host_doc, host_details)


def cmd_workloads_list(args: argparse.Namespace) -> int:
    from simulator.report.text import table
    from simulator.workload.generate import build_trace

    rows = [["name", "model", "parameters", "dtype", "optimizer", "step FLOPs"]]
    docs = []
    for name in workload_names():
        spec = load_workload(name)
        trace = build_trace(spec)
        docs.append({"name": name, "path": spec.path, "model_type": spec.model["type"],
                     "parameters": trace.parameter_count, "flops": trace.flops()})
        rows.append([name, spec.model["type"], f"{trace.parameter_count:,}", spec.dtype,
                     f"{spec.optimizer.type} ({spec.optimizer.implementation})",
                     fmt_flops(trace.flops())])
    if args.json:
        _print_json(docs)
        return 0
    print("\n".join(table(rows, "<<><<>")))
    return 0


def cmd_workloads_show(args: argparse.Namespace) -> int:
    from simulator.pipeline import load_step
    from simulator.workload.memory import profile
    from simulator.workload.trace import PHASES

    spec, trace = load_step(args.workload)  # a trace file (.jsonl) too, as run and memory take
    mem = profile(trace)
    if args.json:
        _print_json({
            "name": spec.name, "path": spec.path, "parameters": trace.parameter_count,
            "parameter_bytes": trace.parameter_bytes,
            "optimizer_state_bytes": trace.optimizer_state_bytes,
            "flops": {p.value: trace.flops(p) for p in PHASES} | {"total": trace.flops()},
            "peak_bytes": mem.peak_bytes, "ops": len(trace.ops)})
        return 0
    print(f"{spec.name} ({spec.path})")
    if spec.description:
        print(f"  {spec.description}")
    print(f"  parameters      {trace.parameter_count:,} in {len(trace.parameters)} tensors "
          f"({trace.parameter_bytes:,} B)")
    print(f"  optimizer state {trace.optimizer_state_bytes:,} B "
          f"({spec.optimizer.type}, {spec.optimizer.implementation})")
    for p in PHASES:
        ops = trace.ops_in(p)
        print(f"  {p.value:<10} {len(ops):>5} ops  {trace.flops(p):>20,} FLOP  "
              f"read {fmt_bytes(sum(o.bytes_read for o in ops))}, "
              f"written {fmt_bytes(sum(o.bytes_written for o in ops))}")
    print(f"  peak live      {mem.peak_bytes:,} B ({fmt_bytes(mem.peak_bytes)}) in "
          f"{mem.peak_phase.value}")
    return 0


def cmd_dram(args: argparse.Namespace) -> int:
    from simulator.dram.report import dram_doc, dram_report
    from simulator.dram.system import MemorySystem

    hw = load_hardware(args.hardware)  # a GPU's own memory path unless the file states one
    system = MemorySystem.from_hardware(hw)
    stats = system.run_trace(Path(args.trace))
    if args.json:
        _print_json(dram_doc(stats, hw, args.trace))
    else:
        print(dram_report(stats, hw, args.trace))
    return 0


def cmd_memory(args: argparse.Namespace) -> int:
    from simulator.pipeline import load_step
    from simulator.report.memory_report import memory_doc, memory_report
    from simulator.workload.allocator import place
    from simulator.workload.memory import profile
    from simulator.workload.remedies import Footprint, largest_batch, remedies

    spec, trace = load_step(args.workload)
    hw = load_hardware(args.hardware)
    mem = profile(trace)
    usable = hw.usable_bytes  # every verdict: the capacity less the runtime's reserve
    fixes = remedies(spec, usable, mem) if mem.peak_bytes > usable else []
    placed = place(trace)
    largest = (largest_batch(spec, usable, Footprint(mem.peak_bytes, placed.reserved_peak))
               if mem.peak_bytes <= usable else None)
    if args.json:
        _print_json(memory_doc(spec, hw, trace, mem, fixes, placed, largest))
    else:
        print(memory_report(spec, hw, trace, mem, fixes, placed, largest))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from simulator.config.loader import read_json
    from simulator.workload import tracefile
    from simulator.workload.generate import build_trace

    spec = load_workload(args.workload)
    trace = build_trace(spec)
    tracefile.write(trace, Path(args.output), source=read_json(Path(spec.path)))
    print(f"wrote {args.output}: {len(trace.tensors):,} tensors, {len(trace.ops):,} ops "
          f"({json.dumps(tracefile.FORMAT)} version {tracefile.FORMAT_VERSION})")
    return 0


def cmd_capture(args: argparse.Namespace) -> int:
    import warnings

    from simulator.workload import tracefile
    from simulator.workload.capture import capture, load_function

    func = load_function(args.target)
    name = args.name or args.target.rsplit(":", 1)[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's own advice on its modules, not ours
        trace = capture(func, name)
    dtypes = [p.dtype for p in trace.parameters]
    captured = {"function": args.target, "optimizer": capture.last_optimizer,
                "dtype": max(set(dtypes), key=dtypes.count) if dtypes else "fp32"}
    tracefile.write(trace, Path(args.output), captured=captured)
    print(f"captured {args.target}: {trace.parameter_count:,} parameters, {len(trace.ops):,} ops, "
          f"{trace.flops():,} FLOP; wrote {args.output}")
    return 0


class _Version(argparse.Action):
    """--version, worked out only when asked (it digests the package's code)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from simulator.version import describe

        print(describe())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m simulator",
        description="GDDR6 roofline simulator for deep-learning training: will the step fit, "
                    "where does its time go, and what would faster memory buy.")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print the release and the digest of the model code, then exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="simulate one training step of a workload on a GPU")
    run.add_argument("workload", help="workload JSON file, a shipped workload's name, or a "
                                      "trace file (.jsonl) written by 'trace'")
    run.add_argument("--hardware", default="t4",
                     help="hardware name (see 'hardware list') or JSON file (default: t4)")
    run.add_argument("--fidelity", choices=FIDELITIES,
                     help="cycle: every 32 B burst through the GDDR6 engine; sampled: windows "
                          "of each op, extrapolated, with an error bound; analytic: the peak "
                          "roofline (default: sampled on GDDR6 cards, analytic on HBM)")
    run.add_argument("--own-windows", action="store_true",
                     help="sampled: every op measured on windows of its own, not those of an "
                          "earlier op of its traffic shape (repeated layers' tensors meet other "
                          "bank conflicts); closer per op, 3-20 times slower")
    run.add_argument("--host", help="host name (see 'hosts list') or JSON file: also simulate "
                     "the input pipeline (storage, page cache, loader workers, PCIe) feeding "
                     "the GPU; the workload needs data.dataset")
    run.add_argument("--json", action="store_true", help="print one JSON document")
    run.add_argument("--top", type=int, default=10, help="ops to list by time (default: 10)")
    run.add_argument("--out", metavar="DIR", help="also write the JSON, text, roofline, "
                     "bandwidth and memory plots (PNG, SVG) and a self-contained HTML report")
    run.set_defaults(func=cmd_run)

    sw = sub.add_parser("sweep", help="what-if hardware sweep: a grid of hardware settings x "
                                      "workloads, in parallel, resumable")
    sw.add_argument("target", help="a sweep file (JSON), or with --vary or several cards a "
                                   "workload (several: comma-separated)")
    sw.add_argument("--hardware", help="the card the --vary settings change (default: t4); "
                    "several, comma-separated, are compared (an axis of their own)")
    sw.add_argument("--host", help="the host feeding the GPU (see 'hosts list'): adds the "
                    "input pipeline; several, comma-separated, are compared (an axis of their "
                    "own)")
    sw.add_argument("--vary", action="append", metavar="NAME=V1,V2,...",
                    help="a parameter and its values; repeat for a grid: hardware "
                         "(data_rate_gbps=12,14,16, nCL=20,24), and with --host the host, "
                         "dataset and loader (host.cpu_cores=4,8,16, "
                         "dataset.bytes_per_sample=50000,110000, loader.workers=2,8)")
    sw.add_argument("--fidelity", choices=FIDELITIES,
                    help="(default: the sweep file's, else sampled where every card's "
                         "memory is GDDR6, analytic otherwise)")
    sw.add_argument("--workers", type=int,
                    help="local processes (default: the CPUs this process may use)")
    sw.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                    help="run the points on this Dask distributed scheduler instead")
    sw.add_argument("--out", metavar="DIR", help="results folder (default: sweep-NAME); "
                    "points already in it are not run again")
    sw.add_argument("--json", action="store_true", help="print the sweep's JSON document")
    sw.set_defaults(func=cmd_sweep)

    mem = sub.add_parser("memory", help="peak device memory of a training step against a card's "
                                        "capacity, and what makes it fit")
    mem.add_argument("workload", help="workload JSON file, or a shipped workload's name")
    mem.add_argument("--hardware", default="t4",
                     help="hardware name or JSON file (default: t4)")
    mem.add_argument("--json", action="store_true", help="print one JSON document")
    mem.set_defaults(func=cmd_memory)

    tr = sub.add_parser("trace", help="write a workload's operator trace (JSON Lines)")
    tr.add_argument("workload", help="workload JSON file, or a shipped workload's name")
    tr.add_argument("-o", "--output", required=True, help="trace file to write (.jsonl)")
    tr.set_defaults(func=cmd_trace)

    cap = sub.add_parser("capture", help="record a PyTorch training step (on the meta device) "
                                         "as a trace file; needs pip install '.[torch]'")
    cap.add_argument("target", help="MODULE:FUNCTION (or path/to/file.py:FUNCTION); "
                                    "FUNCTION(device) returns a step() that runs one training "
                                    "step on device")
    cap.add_argument("-o", "--output", required=True, help="trace file to write (.jsonl)")
    cap.add_argument("--name", help="workload name in the trace (default: FUNCTION)")
    cap.set_defaults(func=cmd_capture)

    dram = sub.add_parser("dram",
                          help="replay a raw address trace through the GDDR6 channel engine")
    dram.add_argument("trace", help="trace file, DRAMsim3 format: '0x<hex address> READ|WRITE "
                                    "<cycle>' per line, cycles in CK")
    dram.add_argument("--hardware", default="t4",
                      help="hardware name or JSON file (GDDR6; default: t4), e.g. "
                           "hardware/validation/ramulator2-gddr6-8ch.json")
    dram.add_argument("--json", action="store_true", help="print one JSON document")
    dram.set_defaults(func=cmd_dram)

    _list_and_show(sub, "hardware", "list or show the shipped hardware descriptions",
                   ("every shipped device with its derived figures", cmd_hardware_list),
                   ("one device in full: clocks, timings, ridge points", cmd_hardware_show,
                    "hardware name or JSON file"))
    _list_and_show(sub, "hosts", "list or show the shipped host descriptions (the machine "
                               "that feeds the GPU: CPU, RAM, storage, PCIe)",
                   ("every shipped host with its storage and cores", cmd_hosts_list),
                   ("one host in full, with its sources", cmd_hosts_show,
                    "host name or JSON file"))
    _list_and_show(sub, "workloads", "list or show the shipped workloads",
                   ("every shipped workload with its size", cmd_workloads_list),
                   ("parameters, FLOPs and bytes per phase of a workload", cmd_workloads_show,
                    "workload JSON file, a shipped workload's name, or a trace file (.jsonl)"))
    return parser


def _list_and_show(sub, name: str, help_text: str, listing: tuple, showing: tuple) -> None:
    """A `NAME list` / `NAME show ITEM` pair of subcommands, each with --json; `NAME` alone
    lists."""
    group = sub.add_parser(name, help=help_text)
    group.add_argument("--json", action="store_true", help="print JSON")
    group.set_defaults(func=listing[1])
    actions = group.add_subparsers(dest="action", metavar="ACTION")
    # (the actions' --json has no default of its own, which would undo one given before them)
    lst = actions.add_parser("list", help=listing[0])
    lst.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    lst.set_defaults(func=listing[1])
    show = actions.add_parser("show", help=showing[0])
    show.add_argument(name.rstrip("s"), help=showing[2])
    show.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    show.set_defaults(func=showing[1])


class _CtrlC:
    """SIGINT handled as Python's own handler does it (a KeyboardInterrupt), and remembered. A
    KeyboardInterrupt raised inside a ctypes callback does not propagate: Python reports it as
    ignored and carries on. numba compiling its first functions runs in such callbacks
    (llvmlite's object-cache hook), and after Ctrl-C lands there numba fails with an error of
    its own ("no compiled object yet"), with no KeyboardInterrupt behind it."""

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, signum: int, frame) -> None:
        self.seen = True
        signal.default_int_handler(signum, frame)


@contextlib.contextmanager
def _ctrl_c_remembered() -> Iterator[_CtrlC]:
    """`_CtrlC` as the SIGINT handler while the command runs, where Python's own handler is
    the one in place (not where SIGINT is ignored, as in a shell's background job); the
    KeyboardInterrupt a ctypes callback swallowed is not printed as an ignored exception with
    its traceback (the run ends with one line saying it was interrupted)."""
    ctrl_c = _CtrlC()
    own = threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if not own:
        yield ctrl_c
        return
    report = sys.unraisablehook

    def unraisable(args) -> None:
        if not (ctrl_c.seen and issubclass(args.exc_type, KeyboardInterrupt)):
            report(args)

    signal.signal(signal.SIGINT, ctrl_c)
    sys.unraisablehook = unraisable
    try:
        yield ctrl_c
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.unraisablehook = report


def _interrupted(exc: BaseException, ctrl_c: _CtrlC) -> bool:
    """Whether Ctrl-C caused this error: a KeyboardInterrupt; one that landed while numba
    loaded a compiled function from its cache and came out as a SystemError raised from it; or
    any error after a Ctrl-C that a ctypes callback swallowed (`_CtrlC`)."""
    if ctrl_c.seen and isinstance(exc, Exception):
        return True
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "top", 1) < 0:
        parser.error("--top: expected a number >= 0")
    if getattr(args, "workers", None) is not None and args.workers < 1:
        parser.error(f"--workers: expected a number >= 1, got {args.workers}")
    with _ctrl_c_remembered() as ctrl_c:
        try:
            return _run(args)
        except BaseException as exc:
            if not _interrupted(exc, ctrl_c):
                raise
    print(f"interrupted{getattr(args, 'interrupted_note', '')}", file=sys.stderr)
    return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    """The command, its bad input and unwritable outputs each told in one line."""
    try:
        return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0
    except OSError as exc:  # an output that cannot be written: a folder that cannot exist, a
        # full disk, no permission (what was written is staged, so nothing is half there)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}cannot write: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_IO
