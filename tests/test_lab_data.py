"""Synthetic data and our own MNIST IDX parser (gz and plain, damaged files)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from cpudoctor.lab.jobs import data


def test_synthetic_is_deterministic_shaped_and_balanced():
    a, b = data.synthetic(500, seed=3), data.synthetic(500, seed=3)
    assert a.images.shape == (500, 1, 28, 28) and a.images.dtype == np.float32
    assert a.labels.dtype == np.int64 and set(np.unique(a.labels)) == set(range(10))
    assert np.array_equal(a.images, b.images) and np.array_equal(a.labels, b.labels)
    assert not np.array_equal(a.images, data.synthetic(500, seed=4).images)


def test_synthetic_classes_are_separable_by_their_pattern():
    """Nearest class pattern already beats chance by far: the data is learnable."""
    ds = data.synthetic(1000, seed=1)
    pats = data.class_patterns().reshape(10, -1)
    pats = (pats - pats.mean(1, keepdims=True)) / pats.std(1, keepdims=True)
    x = ds.images.reshape(len(ds), -1)
    pred = (x @ pats.T).argmax(1)
    assert (pred == ds.labels).mean() > 0.5


def _write_mnist(folder, n=7, gz=False):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    sfx = ".gz" if gz else ""
    data.write_idx(folder / f"train-images-idx3-ubyte{sfx}", images)
    data.write_idx(folder / f"train-labels-idx1-ubyte{sfx}", labels)
    return images, labels


@pytest.mark.parametrize("gz", [False, True])
def test_idx_round_trip_gz_and_plain(tmp_path, gz):
    images, labels = _write_mnist(tmp_path, gz=gz)
    raw = (tmp_path / f"train-images-idx3-ubyte{'.gz' if gz else ''}").read_bytes()
    assert (raw[:2] == b"\x1f\x8b") == gz
    got = data.read_idx(tmp_path / f"train-images-idx3-ubyte{'.gz' if gz else ''}")
    assert got.dtype == np.uint8 and np.array_equal(got, images)
    ds = data.load_mnist(tmp_path, "train")
    assert ds.images.shape == (7, 1, 28, 28) and np.array_equal(ds.labels, labels.astype(np.int64))
    expected = (images[0].astype(np.float32) / 255 - data.MNIST_MEAN) / data.MNIST_STD
    assert np.allclose(ds.images[0, 0], expected)


def test_idx_header_by_hand_big_endian_int32(tmp_path):
    payload = b"\x00\x00\x0c\x01" + (3).to_bytes(4, "big") + b"".join(v.to_bytes(4, "big", signed=True) for v in (1, -2, 70000))
    p = tmp_path / "ints.idx"
    p.write_bytes(payload)
    assert data.read_idx(p).tolist() == [1, -2, 70000]


def test_bad_magic_is_a_clear_error(tmp_path):
    p = tmp_path / "train-images-idx3-ubyte"
    p.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(data.DataError, match="bad magic number 504b0304"):
        data.read_idx(p)
    gzbad = tmp_path / "x.gz"
    gzbad.write_bytes(gzip.compress(b"\x00\x00\x99\x01abcd"))
    with pytest.raises(data.DataError, match="bad magic"):
        data.read_idx(gzbad)


def test_truncated_and_missing_files(tmp_path):
    p = tmp_path / "t.idx"
    p.write_bytes(b"\x00\x00\x08\x02" + (10).to_bytes(4, "big") + (10).to_bytes(4, "big") + b"\0" * 5)
    with pytest.raises(data.DataError, match="truncated"):
        data.read_idx(p)
    with pytest.raises(data.DataError, match="no MNIST train images"):
        data.load_mnist(tmp_path, "train")
    with pytest.raises(data.DataError, match="not a folder"):
        data.load_mnist(tmp_path / "nope")


def test_images_labels_count_mismatch(tmp_path):
    data.write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((3, 28, 28), np.uint8))
    data.write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(2, np.uint8))
    with pytest.raises(data.DataError, match="3 images but 2 labels"):
        data.load_mnist(tmp_path)
