"""The reference traces (benchmarks/reference_traces.py writes them as files), built in memory."""

import random

import numpy as np
from conftest import REPO

from simulator.config.hardware import load_hardware
from simulator.dram.system import MemorySystem

VALIDATION = REPO / "hardware/validation/ramulator2-gddr6-8ch.json"
G = 32
MiB = 2**20


def seq_read(n=1_000_000):
    return np.arange(n, dtype=np.uint64) * G, np.zeros(n, np.int64)


def rand_read(n=1_000_000):
    rng = random.Random(1)
    addr = np.array([G * rng.randrange(2**30 // G) for _ in range(n)], dtype=np.uint64)
    return addr, np.zeros(n, np.int64)


def triad(n=333_334):
    i = np.arange(n, dtype=np.uint64) * G
    addr = np.stack([i, 64 * MiB + i, 128 * MiB + i], axis=1).ravel()
    write = np.tile(np.array([0, 0, 1], np.int64), n)
    return addr, write


def write_trace(path, addr, write, cycles=None):
    ops = np.where(write == 1, "WRITE", "READ")
    cyc = np.zeros(len(addr), np.int64) if cycles is None else cycles
    lines = (f"{hex(int(a))} {o} {int(c)}\n" for a, o, c in zip(addr, ops, cyc, strict=True))
    path.write_text("".join(lines))
    return path


def validation_system(**kw):
    return MemorySystem.from_hardware(load_hardware(VALIDATION), **kw)
