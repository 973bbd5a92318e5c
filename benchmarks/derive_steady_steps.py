"""The steady step time of each Lambda BERT SQuAD run, read off its log.

    python benchmarks/derive_steady_steps.py LAMBDA_CHECKOUT [--write]

LAMBDA_CHECKOUT is a clone of github.com/lambdal/deeplearning-benchmark at commit aa5addb6;
each row of benchmarks/measured/lambda_bert_squad_train.csv names its log there (`source`).

The simulator predicts a training step once the run is warm. Lambda's published throughput is
not that: its runs last 100 steps or two short epochs, and the figure counts the first step
(0.9-6 s: CUDA context, cuBLAS handles, allocator growth), and in the June 2020 runs divides
each epoch's time by a round step count 3-6 % below the iterations the epoch ran (500 of 517,
18 of 19: `training throughput` = batch x steps / epoch seconds, the numbers under it in each
log).
So each row also carries the step time the log shows once warm (`steady_step_ms`), taken as
`steady_from` says:

- `dll 51-101`: the runs from 2021 on log a timestamp (microseconds) after steps 1, 51 and
  101; the step is the time from 51 to 101 over 50.
- `tqdm`: the 2020 runs log whole seconds only, but their progress bar shows the rate it
  smooths over the last iterations (tqdm's exponential moving average, three digits); the
  step is that rate at the first update 100 iterations into the run, at least 5 into its epoch
  and before the epoch's last, partial batch (in runs shorter than that, the last such
  update). On the 2021 runs this reads within 1 % of the timestamps.

`--write` stores the two columns in the CSV; without it the script prints them beside the
published figure.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import re
import sys
import tempfile
from pathlib import Path

BERT_RUNS = Path(__file__).resolve().parent / "measured" / "lambda_bert_squad_train.csv"
DLL_STEP = re.compile(r"DLL (\S+ \S+) - Training Epoch: \d+ Training Iteration: (\d+) ")
TQDM = re.compile(r"Iteration: .*?\| *(\d+)/(\d+) \[[\d:]+<[^,]*, +([\d.]+)(s/it|it/s)\]")
DLL_FROM, DLL_TO = 51, 101
TQDM_AFTER, TQDM_INTO = 100, 5


class LogError(ValueError):
    """A log that does not show what the steady step is read from."""


def _dll_step_s(text: str) -> float | None:
    stamps = {int(m.group(2)): dt.datetime.fromisoformat(m.group(1))
              for m in DLL_STEP.finditer(text)}
    if DLL_FROM not in stamps or DLL_TO not in stamps:
        return None
    return (stamps[DLL_TO] - stamps[DLL_FROM]).total_seconds() / (DLL_TO - DLL_FROM)


def _tqdm_step_s(text: str) -> float | None:
    """The smoothed seconds per iteration the progress bar shows (see the module doc)."""
    done, prev_n, chosen = 0, 0, None
    for m in TQDM.finditer(text):
        n, total, rate = int(m.group(1)), int(m.group(2)), float(m.group(3))
        if n < prev_n:  # a new epoch's bar
            done += prev_n
        prev_n = n
        if not TQDM_INTO <= n < total:
            continue
        chosen = rate if m.group(4) == "s/it" else 1.0 / rate
        if done + n >= TQDM_AFTER:
            break
    return chosen


def steady_step(text: str) -> tuple[float, str]:
    """(seconds per warm step, how it was read) from one run's log."""
    text = text.replace("\r", "\n")
    step = _dll_step_s(text)
    if step is not None:
        return step, f"dll {DLL_FROM}-{DLL_TO}"
    step = _tqdm_step_s(text)
    if step is not None:
        return step, "tqdm"
    raise LogError(f"no step timestamps {DLL_FROM} and {DLL_TO} and no progress-bar rate")


def derive(checkout: Path) -> list[dict]:
    with BERT_RUNS.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        log = checkout / row["source"]
        try:
            step_s, how = steady_step(log.read_text(encoding="utf-8", errors="replace"))
        except OSError as e:
            raise LogError(f"{log}: cannot read it ({e.strerror})") from None
        except LogError as e:
            raise LogError(f"{log}: {e}") from None
        row["steady_step_ms"], row["steady_from"] = f"{step_s * 1e3:.1f}", how
    return rows


def write_csv(rows: list[dict], path: Path, fields: list[str] | tuple[str, ...]) -> None:
    """Replace the CSV whole, so an interrupted run leaves the old file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".csv")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
            out.writeheader()
            out.writerows(rows)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", type=Path,
                    help="a clone of github.com/lambdal/deeplearning-benchmark at aa5addb6")
    ap.add_argument("--write", action="store_true", help=f"store the columns in {BERT_RUNS.name}")
    args = ap.parse_args()
    try:
        rows = derive(args.checkout)
    except LogError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{'run':<52} {'published':>10} {'steady':>8}  (ms per step)  read from")
    for r in rows:
        published = int(r["batch_size"]) / float(r["sequences_per_s"]) * 1e3
        steady = float(r["steady_step_ms"])
        run = f"{r['hardware']} {r['model']} {r['precision']} b{r['batch_size']} {r['run_date']}"
        print(f"{run:<52} {published:10.1f} {steady:8.1f}  {published / steady - 1:+6.1%}"
              f"       {r['steady_from']}")
    if args.write:
        write_csv(rows, BERT_RUNS, list(rows[0]))
        print(f"wrote {BERT_RUNS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
