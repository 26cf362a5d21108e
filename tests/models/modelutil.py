"""Shared helpers for the test-model generators (run with Debian's /usr/bin/python3: numpy + onnx 1.12).

- ExternalWeights: writes initializers into one external-data file (ONNX location/offset/length),
  so several graphs can reference the very same bytes.
- check_model_full: onnx.checker with full_check=True semantics, without rewriting the model file
  (onnx.checker.check_model(path, full_check=True) would overwrite the model with inferred shapes).
- link_or_copy: hard link with a copy as fallback (for weights files next to test-case models).
"""
import os
import shutil
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8


class ExternalWeights:
    """Accumulates float tensors for one external-data file.

    Every tensor gets a page-aligned offset when it is at least one page long (so a runtime can mmap it
    directly), otherwise a 64-byte aligned one.
    """

    PAGE = 4096

    def __init__(self, location):
        self.location = location  # file name relative to the model's folder
        self.chunks = []          # (offset, bytes)
        self.size = 0
        self.tensors = {}         # name -> (offset, length, dtype, shape)

    def add(self, name, array):
        array = np.ascontiguousarray(array)
        data = array.tobytes()  # little-endian on every supported host
        align = self.PAGE if len(data) >= self.PAGE else 64
        offset = (self.size + align - 1) // align * align
        self.chunks.append((offset, data))
        self.size = offset + len(data)
        self.tensors[name] = (offset, len(data), array.dtype, array.shape)
        return name

    def initializer(self, name):
        """A TensorProto that points into the external file (no data inline)."""
        offset, length, dtype, shape = self.tensors[name]
        t = TensorProto()
        t.name = name
        t.data_type = helper.np_dtype_to_tensor_dtype(dtype) if hasattr(helper, "np_dtype_to_tensor_dtype") \
            else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)]
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", self.location), ("offset", str(offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key = k
            e.value = v
        return t

    def all_initializers(self):
        return [self.initializer(n) for n in self.tensors]

    def write(self, folder):
        path = os.path.join(folder, self.location)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            for offset, data in self.chunks:
                f.seek(offset)
                f.write(data)
            f.truncate(self.size)
        os.replace(tmp, path)
        return path


def const(name, value, dtype=np.int64):
    """A small inline initializer."""
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def make_model(graph, producer="epctx-tests"):
    model = helper.make_model(graph, producer_name=producer,
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


def save_model(model, path):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(model.SerializeToString())
    os.replace(tmp, path)


def check_model_full(path):
    """Same checks as onnx.checker.check_model(path, full_check=True), but the inferred model goes to a
    temporary file instead of overwriting `path`."""
    onnx.checker.check_model(path)  # path form: also resolves external data files
    with tempfile.TemporaryDirectory() as d:
        onnx.shape_inference.infer_shapes_path(path, os.path.join(d, "inferred.onnx"),
                                               check_type=True, strict_mode=True)


def link_or_copy(src, dst):
    """Hard-link src to dst (replacing dst), falling back to a copy across file systems."""
    if os.path.lexists(dst):
        try:
            if os.path.samefile(src, dst):
                return
        except OSError:
            pass
        os.remove(dst)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
