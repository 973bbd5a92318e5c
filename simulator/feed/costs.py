"""What one sample costs each stage of the input pipeline, from the host's and dataset's figures;
and how often the page cache holds a sample it is asked for."""

from __future__ import annotations

import random
from collections import OrderedDict
from functools import cache

from simulator.config.dataset import DatasetSpec, LoaderSpec
from simulator.config.host import Host
from simulator.units import GB, MB


def gpu_decodes(dataset: DatasetSpec, loader: LoaderSpec) -> bool:
    """JPEG decoded on the GPU (as DALI's nvJPEG does): the workers pass the stored bytes on."""
    return dataset.format == "jpeg" and loader.decode == "gpu"


def decode_cpu_s(dataset: DatasetSpec, loader: LoaderSpec, host: Host) -> float:
    """Seconds of one core to turn one stored sample into its collated form: decode (JPEG
    through the training augmentation; a codec's decompression) and the copy into the batch.
    With GPU decoding the workers only pass the stored bytes on."""
    cpu = host.cpu
    if gpu_decodes(dataset, loader):
        return dataset.bytes_per_sample / (cpu.copy_GBps * GB)
    work = dataset.collated_bytes_per_sample / (cpu.copy_GBps * GB)
    if dataset.format == "jpeg":
        work += dataset.megapixels_per_sample / cpu.jpeg_megapixels_per_s
    elif dataset.format == "compressed":
        work += dataset.bytes_per_sample * dataset.compression_ratio / (cpu.decompress_MBps * MB)
    return work


def batch_bytes_to_gpu(dataset: DatasetSpec, loader: LoaderSpec, batch: int) -> float:
    """Bytes one batch moves over the host link: collated tensors, or with GPU decoding the
    stored JPEG bytes the GPU decodes."""
    per = dataset.bytes_per_sample if gpu_decodes(dataset, loader) \
        else dataset.collated_bytes_per_sample
    return per * batch


def copy_s(dataset: DatasetSpec, loader: LoaderSpec, host: Host, batch: int) -> float:
    """Seconds one batch takes over the host link, from pinned or pageable memory."""
    return host.pcie.copy_s(batch_bytes_to_gpu(dataset, loader, batch), loader.pin_memory)


def gpu_decode_s(dataset: DatasetSpec, loader: LoaderSpec, batch: int) -> float:
    """GPU seconds per step spent decoding (GPU decoding only)."""
    if not gpu_decodes(dataset, loader):
        return 0.0
    return batch * dataset.megapixels_per_sample / loader.gpu_decode_megapixels_per_s


def cache_fraction(dataset: DatasetSpec, host: Host) -> float:
    return host.page_cache_bytes / dataset.stored_bytes


# LRU is simulated on a dataset of this many samples: the hit rate depends on the cache's
# share of the dataset, not on its size, and this many keeps the estimate within about 1 %
_LRU_SAMPLES = 20_000
_LRU_EPOCHS = 3  # one to fill the cache, then measured


@cache
def _lru_hit_rate(fraction_per_mille: int, access: str) -> float:
    n = _LRU_SAMPLES
    capacity = n * fraction_per_mille // 1000
    rng = random.Random(0)
    order = list(range(n))
    lru: OrderedDict[int, None] = OrderedDict()
    hits = reads = 0
    for epoch in range(_LRU_EPOCHS):
        if access == "random":
            rng.shuffle(order)
        for i in order:
            if i in lru:
                lru.move_to_end(i)
                hits += epoch > 0
            else:
                lru[i] = None
                if len(lru) > capacity:
                    lru.popitem(last=False)
            reads += epoch > 0
    return hits / reads


def page_cache_hit_rate(dataset: DatasetSpec, host: Host) -> float:
    """Share of reads the page cache serves once an epoch has filled it. The kernel's cache is
    close to LRU here: a shuffled epoch re-reads each sample at a random distance from its last
    read, so a cache of a share c < 1 of the dataset holds well under c of the next epoch's
    samples, and a sequential epoch (the same order every time) holds none of them: each is
    evicted just before it is read again (Mohan et al., Analyzing and Mitigating Data Stalls in
    DNN Training, VLDB 2021, section 4: the page cache thrashes)."""
    c = cache_fraction(dataset, host)
    if c >= 1:
        return 1.0
    return _lru_hit_rate(int(c * 1000), dataset.access)
