"""A workload's training data (`data.dataset`) and how batches are made of it (`data.loader`)."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.errors import InputError
from simulator.units import MiB

DEFAULT_SHARD_BYTES = 256 * MiB
# decode gpu: megapixels per second of JPEG decode and augmentation on the GPU (nvJPEG as DALI
# runs it); an estimate, some 11,000 ImageNet images/s, for a loader file to override
GPU_DECODE_MEGAPIXELS_PER_S = 2000.0


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    samples: int
    bytes_per_sample: float          # as stored
    format: str                      # raw | jpeg | tokens | compressed
    collated_bytes_per_sample: float  # in the batch the GPU receives
    access: str                      # random | sequential
    megapixels_per_sample: float | None = None   # jpeg
    compression_ratio: float | None = None       # compressed: decompressed / stored bytes
    shard_bytes: int = DEFAULT_SHARD_BYTES       # sequential
    source: str = ""

    @property
    def stored_bytes(self) -> float:
        return self.samples * self.bytes_per_sample


@dataclass(frozen=True)
class LoaderSpec:
    """PyTorch DataLoader's settings, with its defaults where the file gives none (but 8
    workers: its own default, 0, loads in the training process)."""

    workers: int = 8
    prefetch_factor: int = 2
    pin_memory: bool = True
    decode: str = "cpu"              # cpu | gpu (jpeg only)
    gpu_decode_megapixels_per_s: float = GPU_DECODE_MEGAPIXELS_PER_S
    copy: str = "in_step"            # in_step | overlapped


# keys that apply to one format or access pattern only
_ONLY = {"megapixels_per_sample": ("format", "jpeg"),
         "compression_ratio": ("format", "compressed"),
         "shard_bytes": ("access", "sequential")}


def parse_dataset(raw: dict, file: str) -> DatasetSpec:
    for key, (field, value) in _ONLY.items():
        if key in raw and raw[field] != value:
            raise InputError(f"'{key}' applies to {field} {value}; this dataset's {field} is "
                             f"{raw[field]}", file=file, path=f"$.data.dataset.{key}")
    for key, (field, value) in list(_ONLY.items())[:2]:
        if raw[field] == value and key not in raw:
            raise InputError(f"{field} {value} needs '{key}'", file=file,
                             path=f"$.data.dataset.{key}")
    return DatasetSpec(
        name=raw["name"], samples=raw["samples"], bytes_per_sample=raw["bytes_per_sample"],
        format=raw["format"], collated_bytes_per_sample=raw["collated_bytes_per_sample"],
        access=raw["access"], megapixels_per_sample=raw.get("megapixels_per_sample"),
        compression_ratio=raw.get("compression_ratio"),
        shard_bytes=raw.get("shard_bytes", DEFAULT_SHARD_BYTES), source=raw.get("source", ""))


def parse_loader(raw: dict, dataset: DatasetSpec | None, file: str) -> LoaderSpec:
    if raw and dataset is None:
        raise InputError("a loader makes batches of a dataset, and this workload has none: "
                         "expected data.dataset beside it", file=file, path="$.data.loader")
    loader = LoaderSpec(**raw)
    if loader.decode == "gpu" and dataset is not None and dataset.format != "jpeg":
        raise InputError(f"GPU decoding decodes JPEG; this dataset's format is "
                         f"{dataset.format}: expected decode cpu", file=file,
                         path="$.data.loader.decode")
    return loader
