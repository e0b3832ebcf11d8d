"""Training data: synthetic MNIST-shaped images, or real MNIST IDX files from a folder.

Synthetic: each class has its own fixed pattern (a few Gaussian strokes placed
by a seeded generator); a sample is its class pattern, shifted by up to two
pixels and scaled a little, plus Gaussian noise. It is deterministic for a
seed and learnable: loss falls within seconds and accuracy climbs far above
chance, but the noise keeps it from being solved by the first batch.

Real MNIST: our own IDX parser (http://yann.lecun.com/exdb/mnist/ format:
magic 0x0000, type code, rank, big-endian sizes), gzip or not. Nothing is
ever downloaded. numpy only: no torch import here.
"""

from __future__ import annotations

import gzip
import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

if __package__:
    from ._jobkit import JobError
else:  # run from a standalone job script: its folder is on sys.path already, or is put there now
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _jobkit import JobError

IMAGE_SIZE = 28
NUM_CLASSES = 10
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


class DataError(JobError):
    """Data could not be read; the message names the file and what is wrong."""

    kind = "data"


@dataclass
class Dataset:
    images: np.ndarray          # float32, N x 1 x 28 x 28, normalised
    labels: np.ndarray          # int64, N
    name: str

    def __len__(self) -> int:
        return int(self.labels.shape[0])


# ---------------------------------------------------------------- synthetic

def class_patterns(seed: int = 1234, size: int = IMAGE_SIZE) -> np.ndarray:
    """10 distinct patterns, each 3 Gaussian strokes at seeded places, values 0..1."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    patterns = np.zeros((NUM_CLASSES, size, size), np.float32)
    for c in range(NUM_CLASSES):
        for _ in range(3):
            cy, cx = rng.uniform(6, size - 6, 2)
            sy, sx = rng.uniform(1.5, 5.0, 2)
            patterns[c] += np.exp(-(((yy - cy) / sy) ** 2 + ((xx - cx) / sx) ** 2) / 2)
        patterns[c] /= patterns[c].max()
    return patterns


def synthetic(n: int, seed: int = 0, noise: float = 1.0, pattern_seed: int = 1234) -> Dataset:
    """``n`` learnable MNIST-shaped samples, deterministic for (seed, pattern_seed)."""
    if n <= 0:
        raise DataError("the synthetic data set needs at least one sample")
    rng = np.random.default_rng(seed)
    patterns = class_patterns(pattern_seed)
    labels = rng.integers(0, NUM_CLASSES, n)
    shifts = rng.integers(-2, 3, (n, 2))
    scales = rng.uniform(0.7, 1.3, n).astype(np.float32)
    # Every (class, shift) image once, then one gather: a job starts in milliseconds, not a Python loop per sample.
    rolled = np.stack([np.stack([np.stack([np.roll(patterns[c], (dy, dx), axis=(0, 1)) for dx in range(-2, 3)])
                                 for dy in range(-2, 3)]) for c in range(NUM_CLASSES)])
    images = rolled[labels, shifts[:, 0] + 2, shifts[:, 1] + 2] * scales[:, None, None]
    images += rng.normal(0.0, noise, images.shape).astype(np.float32)
    images = (images - images.mean()) / images.std()
    return Dataset(images[:, None].astype(np.float32), labels.astype(np.int64), "synthetic")


# ---------------------------------------------------------------- IDX / MNIST

_IDX_TYPES = {
    0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8"),
}


def parse_idx(data: bytes, name: str = "IDX data") -> np.ndarray:
    """Decode IDX bytes (already decompressed) to an array of the stored shape."""
    if len(data) < 4:
        raise DataError(f"{name}: too short to be an IDX file ({len(data)} bytes)")
    zero, type_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or type_code not in _IDX_TYPES or ndim == 0:
        raise DataError(
            f"{name}: bad magic number {data[:4].hex()} (an IDX file starts with 0000, a type "
            "code 08/09/0b/0c/0d/0e and the number of dimensions); is this an MNIST file?")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataError(f"{name}: header cut short")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    dtype = _IDX_TYPES[type_code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) - header < expected:
        raise DataError(f"{name}: truncated: shape {shape} needs {expected} bytes of data, "
                        f"the file has {len(data) - header}")
    arr = np.frombuffer(data, dtype, count=expected // dtype.itemsize, offset=header)
    return arr.reshape(shape).astype(dtype.newbyteorder("="))


def read_idx(path: Path | str) -> np.ndarray:
    """Read an IDX file, gzip-compressed (detected by its magic, not its name) or plain."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise DataError(f"{path}: damaged gzip data ({exc})") from None
    return parse_idx(raw, str(path.name))


_STEMS = {
    ("train", "images"): ("train-images-idx3-ubyte", "train-images.idx3-ubyte"),
    ("train", "labels"): ("train-labels-idx1-ubyte", "train-labels.idx1-ubyte"),
    ("test", "images"): ("t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte"),
    ("test", "labels"): ("t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte"),
}


def find_mnist_file(folder: Path, split: str, part: str) -> Path:
    """The IDX file for (split, part) in ``folder`` or its ``raw/`` or ``MNIST/raw/`` sub-folder."""
    stems = _STEMS[(split, part)]
    for base in (folder, folder / "raw", folder / "MNIST" / "raw"):
        for stem in stems:
            for suffix in ("", ".gz"):
                candidate = base / (stem + suffix)
                if candidate.is_file():
                    return candidate
    raise DataError(f"no MNIST {split} {part} in {folder} (looked for {stems[0]} or {stems[0]}.gz)")


def load_mnist(folder: Path | str, split: str = "train", limit: int | None = None) -> Dataset:
    """MNIST from a folder the user picked, normalised like torchvision's usual transform."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise DataError(f"{folder} is not a folder")
    images = read_idx(find_mnist_file(folder, split, "images"))
    labels = read_idx(find_mnist_file(folder, split, "labels"))
    if images.ndim != 3 or images.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE):
        raise DataError(f"MNIST {split} images have shape {images.shape}, expected N x 28 x 28")
    if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
        raise DataError(f"MNIST {split}: {images.shape[0]} images but {labels.shape[0]} labels")
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    x = (images.astype(np.float32) / 255.0 - MNIST_MEAN) / MNIST_STD
    y = labels.astype(np.int64)
    if y.size and (y.min() < 0 or y.max() >= NUM_CLASSES):
        raise DataError(f"MNIST {split} labels outside 0..9")
    return Dataset(x[:, None], y, f"MNIST {split}")


def write_idx(path: Path | str, array: np.ndarray, compress: bool | None = None) -> Path:
    """Write ``array`` as IDX (gzip when the name ends in .gz); used by tests and for small exports."""
    path = Path(path)
    codes = {v.newbyteorder("="): k for k, v in _IDX_TYPES.items()}
    native = array.dtype.newbyteorder("=")
    if native not in codes:
        raise DataError(f"IDX cannot store dtype {array.dtype}")
    big = array.astype(_IDX_TYPES[codes[native]])
    data = struct.pack(">HBB", 0, codes[native], array.ndim) + struct.pack(f">{array.ndim}I", *array.shape) + big.tobytes()
    if compress if compress is not None else path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)
    return path
