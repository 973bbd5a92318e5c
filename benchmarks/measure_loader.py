"""Measure a real multi-process image loader on this machine, as validation data for the input
pipeline (simulator/feed/): what one core decodes, and what W worker processes supply to a
consumer that takes one batch per `gpu_step` seconds.

The loader follows PyTorch DataLoader's semantics (worker w builds batches w, w + W, ...; at most
prefetch_factor x W batches outstanding; batches handed over in order through shared memory, as
torch's tensors are), written with multiprocessing because PyTorch's wheels are not reachable
from every machine this runs on. Each sample: a JPEG of ImageNet's mean size (469 x 387) read
from a file, decoded by Pillow (libjpeg-turbo), random-resized-cropped to 224 x 224, flipped,
and normalized to float32 CHW (torchvision's training transforms, in numpy).

    python benchmarks/measure_loader.py [--out benchmarks/measured/loader]

writes host.json (this machine's measured per-core rates, as host-file inputs) and runs.csv
(throughput and data wait per step for each configuration, the median of three runs).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import multiprocessing as mp
import os
import platform
import queue
import random
import tempfile
import time
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np
from PIL import Image

WIDTH, HEIGHT = 469, 387          # ImageNet's mean image (arXiv:1707.08819)
CROP = 224
SAMPLES = 2400
BATCH = 32
REPEATS = 3   # runs per configuration; the median is kept, the spread stated
MEAN = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
STD = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]


def make_images(folder: Path, n: int) -> list[Path]:
    """Photographs stand-ins: smooth random fields plus grain, JPEG quality 90, so that they
    code at about ImageNet's 110 KB per image."""
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        small = rng.integers(0, 256, (12, 15, 3), dtype=np.uint8)
        img = Image.fromarray(small).resize((WIDTH, HEIGHT), Image.BICUBIC)
        arr = np.asarray(img, np.int16) + rng.normal(0, 14, (HEIGHT, WIDTH, 3)).astype(np.int16)
        buf = io.BytesIO()
        Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=90)
        p = folder / f"{i:05d}.jpg"
        p.write_bytes(buf.getvalue())
        paths.append(p)
    return paths


def transform(path: Path, rng: random.Random) -> np.ndarray:
    """torchvision's RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize."""
    with Image.open(path) as im:
        im = im.convert("RGB")
        w, h = im.size
        area = w * h * rng.uniform(0.08, 1.0)
        ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        cw = int(round(min(w, np.sqrt(area * ratio))))
        ch = int(round(min(h, np.sqrt(area / ratio))))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        im = im.resize((CROP, CROP), Image.BILINEAR, box=(x, y, x + cw, y + ch))
        if rng.random() < 0.5:
            im = im.transpose(Image.FLIP_LEFT_RIGHT)
        chw = np.asarray(im, np.float32).transpose(2, 0, 1) / 255.0
    return (chw - MEAN) / STD


def _worker(w: int, workers: int, paths: list[Path], steps: int, tasks, done, shm_names):
    rng = random.Random(w)
    for b in range(w, steps, workers):
        tasks.get()   # a slot: prefetch_factor x W batches outstanding
        shm = shared_memory.SharedMemory(name=shm_names[b % len(shm_names)])
        out = np.ndarray((BATCH, 3, CROP, CROP), np.float32, buffer=shm.buf)
        for i in range(BATCH):
            out[i] = transform(paths[(b * BATCH + i) % len(paths)], rng)
        del out
        shm.close()
        done.put(b)


def run_loader(paths: list[Path], workers: int, prefetch: int, gpu_step_s: float,
               steps: int) -> tuple[float, float]:
    """(samples/s over the steady steps, mean seconds the consumer waited per steady step)."""
    ahead = prefetch * workers
    buffers = [shared_memory.SharedMemory(create=True, size=BATCH * 3 * CROP * CROP * 4)
               for _ in range(ahead + 1)]
    ctx = mp.get_context("fork")
    tasks, done = ctx.Queue(), ctx.Queue()
    for _ in range(ahead):
        tasks.put(1)
    procs = [ctx.Process(target=_worker, args=(w, workers, paths, steps, tasks, done,
                                               [b.name for b in buffers]))
             for w in range(workers)]
    for p in procs:
        p.start()
    ready, starts, waits = set(), [], []
    try:
        for b in range(steps):
            t0 = time.perf_counter()
            while b not in ready:
                ready.add(done.get(timeout=600))
            waits.append(time.perf_counter() - t0)
            starts.append(time.perf_counter())
            ready.discard(b)
            tasks.put(1)   # the batch is consumed: its slot goes back
            if gpu_step_s:
                time.sleep(gpu_step_s)
    except queue.Empty:
        raise RuntimeError("a loader worker stopped") from None
    finally:
        for p in procs:
            p.join(timeout=5)
        for buf in buffers:
            buf.close()
            buf.unlink()
    skip = ahead
    steady = steps - 1 - skip
    return BATCH * steady / (starts[-1] - starts[skip]), sum(waits[skip + 1:]) / steady


def per_core(paths: list[Path]) -> dict[str, float]:
    """One core: megapixels/s of stored JPEG through the transforms; GB/s of memcpy."""
    rng = random.Random(1)
    for p in paths[:20]:
        transform(p, rng)   # warm
    n = 300
    t = time.perf_counter()
    for p in paths[:n]:
        transform(p, rng)
    per_image = (time.perf_counter() - t) / n
    src = np.ones(64 * 2**20, np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    t = time.perf_counter()
    for _ in range(20):
        np.copyto(dst, src)
    copy = 20 * src.nbytes / (time.perf_counter() - t) / 1e9
    return {"jpeg_megapixels_per_s": WIDTH * HEIGHT / 1e6 / per_image,
            "images_per_s": 1 / per_image, "copy_GBps": copy}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).parent / "measured" / "loader"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_images(Path(tmp), SAMPLES)
        mean_bytes = sum(p.stat().st_size for p in paths) / len(paths)
        rates = per_core(paths)
        print(f"one core: {rates['images_per_s']:.0f} images/s = "
              f"{rates['jpeg_megapixels_per_s']:.1f} megapixels/s; copy {rates['copy_GBps']:.2f}"
              f" GB/s; {mean_bytes / 1e3:.1f} kB per JPEG")
        rows = []
        for workers in (1, 2):
            for gpu_step in (0.0, 0.05, 0.1, 0.2):
                steps = 4 * workers + 40
                runs = sorted(run_loader(paths, workers, 2, gpu_step, steps)
                              for _ in range(REPEATS))
                rate, wait = runs[REPEATS // 2]   # the median run by throughput
                rows.append({"workers": workers, "prefetch_factor": 2, "batch": BATCH,
                             "gpu_step_s": gpu_step, "steps": steps, "repeats": REPEATS,
                             "samples_per_s": round(rate, 2),
                             "samples_per_s_min": round(runs[0][0], 2),
                             "samples_per_s_max": round(runs[-1][0], 2),
                             "wait_s_per_step": round(wait, 5)})
                print(f"workers {workers}, GPU step {gpu_step * 1e3:.0f} ms: {rate:.1f} "
                      f"samples/s, waits {wait * 1e3:.1f} ms per step")
    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    (out / "host.json").write_text(json.dumps({
        "cpu": cpu, "cores": cores, "python": platform.python_version(),
        "pillow": Image.__version__, "numpy": np.__version__,
        "jpeg_bytes_per_sample": round(mean_bytes), "width": WIDTH, "height": HEIGHT,
        "samples": SAMPLES, "batch": BATCH, **{k: round(v, 3) for k, v in rates.items()},
        "storage": "the files just written: every read a page-cache hit"}, indent=2) + "\n")


if __name__ == "__main__":
    main()
