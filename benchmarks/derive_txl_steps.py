"""Lambda's Transformer-XL training runs on single GDDR6 GPUs, read off their logs.

    python benchmarks/derive_txl_steps.py LAMBDA_CHECKOUT [--write]

LAMBDA_CHECKOUT is a clone of github.com/lambdal/deeplearning-benchmark at commit aa5addb6.
Each run (`pytorch/results/<system>/PyTorch_transformerxl{base,large}_{FP32,FP16}/*.txt`)
trains NVIDIA DeepLearningExamples' Transformer-XL base or large for 400 steps (from 2021,
100) and logs the
mean time per step over every 10 (`ms/batch`), each step waited on by the loop's `loss.item()`.
The warm step (`steady_step_ms`) is the median of those after the first 10 steps (which hold
the CUDA context's start, TorchScript's profiling runs and the allocator's growth: 1.3-2 times
the later ones); the run's batch comes from the arguments it prints. The systems are those of
`lambda_bert_squad_train.csv` (the same machines, cards and containers; its `pytorch` column is
the container's build); a run that did not finish (no `Training throughput`) is left out.
`release` is the Transformer-XL code the run's arguments show: `2020.02` (DeepLearningExamples
commit a38deff6, no `dllog_file` argument) or `2020.09` (commit 6b82d3ac on).

`--write` stores the rows in `benchmarks/measured/lambda_transformerxl_train.csv`; without it
the script prints them.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_steady_steps import BERT_RUNS, write_csv  # noqa: E402  (the BERT runs' reader)

OUT = BERT_RUNS.parent / "lambda_transformerxl_train.csv"
STEP = re.compile(r"\| epoch +\d+ step +(\d+) \|.*?\| ms/batch +([\d.]+) \|")
BATCH = re.compile(r"batch_size=(\d+)")
THROUGHPUT = re.compile(r"Training throughput: ([\d.]+) tok/s")
TGT_LEN = re.compile(r"[(, ]tgt_len=(\d+)")
WARM_FROM = 20
PRECISIONS = {"FP32": "fp32", "FP16": "amp"}
FIELDS = ("hardware", "lambda_system", "model", "precision", "batch_size", "tgt_len",
          "tokens_per_s", "steady_step_ms", "run_date", "source", "pytorch", "release")
MODELS = ("base", "large")


class LogError(ValueError):
    """A log that does not show what a row is read from."""


def read_run(text: str) -> dict | None:
    """The run's batch, segment, published throughput and warm step; None if unfinished."""
    done = THROUGHPUT.search(text)
    if done is None:
        return None
    batch, tgt = BATCH.search(text), TGT_LEN.search(text)
    steps = [float(ms) for step, ms in STEP.findall(text) if int(step) >= WARM_FROM]
    if batch is None or tgt is None or not steps:
        raise LogError(f"no batch_size, tgt_len or ms/batch lines from step {WARM_FROM}")
    return {"batch_size": batch.group(1), "tgt_len": tgt.group(1),
            "tokens_per_s": done.group(1), "steady_step_ms": f"{statistics.median(steps):.1f}",
            "release": "2020.09" if "dllog_file=" in text else "2020.02"}


def derive(checkout: Path) -> list[dict]:
    with BERT_RUNS.open(newline="") as f:
        systems = {(r["lambda_system"]): (r["hardware"], r["pytorch"]) for r in csv.DictReader(f)}
    rows = []
    for system, (hardware, pytorch) in sorted(systems.items()):
        for model in MODELS:
            for flag, precision in PRECISIONS.items():
                folder = (checkout / "pytorch" / "results" / system
                          / f"PyTorch_transformerxl{model}_{flag}")
                rows += _runs(checkout, folder, {"hardware": hardware, "lambda_system": system,
                                                 "model": model, "precision": precision},
                              pytorch)
    if not rows:
        raise LogError(f"{checkout}: no Transformer-XL logs under pytorch/results")
    return rows


def _runs(checkout: Path, folder: Path, keys: dict, pytorch: str) -> list[dict]:
    rows = []
    for log in sorted(folder.glob("*.txt")):
        try:
            run = read_run(log.read_text(encoding="utf-8", errors="replace"))
        except OSError as e:
            raise LogError(f"{log}: cannot read it ({e.strerror})") from None
        except LogError as e:
            raise LogError(f"{log}: {e}") from None
        if run is None:
            continue
        date = dt.datetime.strptime(log.name[:10], "%d-%m-%Y").date().isoformat()
        rows.append({**keys, **run, "run_date": date,
                     "source": log.relative_to(checkout).as_posix(), "pytorch": pytorch})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", type=Path,
                    help="a clone of github.com/lambdal/deeplearning-benchmark at aa5addb6")
    ap.add_argument("--write", action="store_true", help=f"store the rows in {OUT.name}")
    args = ap.parse_args()
    try:
        rows = derive(args.checkout)
    except LogError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{'run':<58} {'published':>10} {'steady':>8}  (ms per step)")
    for r in rows:
        tokens = int(r["batch_size"]) * int(r["tgt_len"])
        published = tokens / float(r["tokens_per_s"]) * 1e3
        steady = float(r["steady_step_ms"])
        run = f"{r['hardware']} {r['model']} {r['precision']} b{r['batch_size']} {r['run_date']}"
        print(f"{run:<58} {published:10.1f} {steady:8.1f}  {published / steady - 1:+6.1%}")
    if args.write:
        write_csv(rows, OUT, FIELDS)
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
