"""A tiny real workload per package, run in the child right after its import.

A helper of the standalone child scripts (standard library only besides the
package under test, Python 3.8+). ``import numpy`` can work while numpy's
first matrix product dies: OpenBLAS picks its kernels on the first call, and
``OPENBLAS_CORETYPE=SkylakeX`` on a CPU without AVX-512 is a SIGILL there, not
at import. So each package runs the smallest operation that goes through its
native kernels, big enough to start its thread pool: a BLAS matrix product for
numpy and scipy, a matmul and a convolution for torch, a matmul for
TensorFlow and JAX, a one-node model for ONNX Runtime, a blur for OpenCV. The
child prints the stage before each workload, so a crash is blamed on the
package (and library) that was running.
"""

from __future__ import annotations

import importlib
from typing import Callable, Dict

# Big enough that OpenBLAS and MKL split the product over threads (both go
# parallel well below 256^3 multiply-adds), small enough to take milliseconds.
N = 384


def _numpy() -> str:
    import numpy as np

    a = np.ones((N, N))
    (a @ a).sum()
    return f"matrix product {N}x{N} float64 (numpy's BLAS)"


def _scipy() -> str:
    import numpy as np
    from scipy import linalg

    a = np.eye(N) * 2.0 + 0.01
    linalg.lu_factor(a)
    return f"LU factorisation {N}x{N} (scipy.linalg's LAPACK)"


def _torch() -> str:
    import torch

    a = torch.ones(N, N)
    torch.mm(a, a).sum().item()
    x = torch.ones(1, 3, 64, 64)
    w = torch.ones(8, 3, 3, 3)
    torch.nn.functional.conv2d(x, w, padding=1).sum().item()
    return f"matmul {N}x{N} float32 and conv2d 3->8 channels 64x64 (MKL/oneDNN, OpenMP)"


def _torchvision() -> str:
    import torch
    from torchvision.ops import nms

    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [50.0, 50.0, 60.0, 60.0]])
    nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
    return "torchvision.ops.nms on 3 boxes (torchvision's C++ kernels)"


def _tensorflow() -> str:
    import tensorflow as tf

    a = tf.ones((N, N))
    float(tf.reduce_sum(tf.linalg.matmul(a, a)))
    return f"tf.linalg.matmul {N}x{N} float32 (Eigen/oneDNN)"


def _jax() -> str:
    import jax.numpy as jnp

    a = jnp.ones((N, N))
    float(jnp.dot(a, a).sum())
    return f"jax.numpy.dot {N}x{N} float32 (XLA CPU)"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload) -> bytes:
    """One protobuf field: an int is a varint (wire type 0), bytes/str are length-delimited (type 2)."""
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def onnx_matmul_model(n: int = 64) -> bytes:
    """The bytes of an ONNX model ``C = MatMul(A, B)`` on ``n x n`` float tensors, without the onnx package."""
    dim = _field(1, _field(1, n))                                  # TensorShapeProto.Dimension(dim_value=n)
    shape = _field(2, dim + dim)                                   # TypeProto.Tensor.shape
    tensor_type = _field(1, _field(1, 1) + shape)                  # TypeProto.tensor_type(elem_type=FLOAT)

    def value(name: str) -> bytes:
        return _field(1, name) + _field(2, tensor_type)            # ValueInfoProto(name, type)

    node = _field(1, "A") + _field(1, "B") + _field(2, "C") + _field(4, "MatMul")
    graph = (_field(1, node) + _field(2, "smoke") + _field(11, value("A")) + _field(11, value("B"))
             + _field(12, value("C")))
    opset = _field(1, "") + _field(2, 13)
    return _field(1, 7) + _field(7, graph) + _field(8, opset)     # ir_version 7, graph, opset_import


def _onnxruntime() -> str:
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(onnx_matmul_model(64), providers=["CPUExecutionProvider"])
    a = np.ones((64, 64), dtype=np.float32)
    session.run(None, {"A": a, "B": a})
    return "a one-node MatMul model 64x64 (ONNX Runtime's CPU provider)"


def _cv2() -> str:
    import cv2
    import numpy as np

    cv2.GaussianBlur(np.ones((256, 256, 3), dtype=np.uint8), (5, 5), 0)
    return "GaussianBlur 256x256 (OpenCV)"


WORKLOADS: Dict[str, Callable[[], str]] = {
    "numpy": _numpy,
    "scipy": _scipy,
    "torch": _torch,
    "torchvision": _torchvision,
    "tensorflow": _tensorflow,
    "jax": _jax,
    "jaxlib": _jax,
    "onnxruntime": _onnxruntime,
    "cv2": _cv2,
}


def has_workload(module: str) -> bool:
    return module in WORKLOADS


def run_workload(module: str) -> str:
    """Run ``module``'s workload (it is imported already); returns what ran. Raises what the package raises."""
    importlib.import_module(module)
    return WORKLOADS[module]()
