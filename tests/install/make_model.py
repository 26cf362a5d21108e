"""Writes the tiny model the install tests run, as an ONNX backend test folder:
  OUT_DIR/model.onnx                      Y = Relu(X @ W + B), X float [2, 3], W [3, 4], B [4]
  OUT_DIR/test_data_set_0/input_0.pb      X
  OUT_DIR/test_data_set_0/output_0.pb     Y computed here with numpy
W[i][j] = (4 * i + j - 5) / 4, B[j] = j / 2 - 1 and X are also in tests/install/app/main.cc and pc_app.cc.
Usage: /usr/bin/python3 make_model.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
w = np.array([[(4 * i + j - 5) / 4 for j in range(4)] for i in range(3)], dtype=np.float32)
b = np.array([j / 2 - 1 for j in range(4)], dtype=np.float32)
x = np.array([[1.0, 2.0, 0.5], [-3.0, 0.25, 1.5]], dtype=np.float32)
y = np.maximum(x @ w + b, 0).astype(np.float32)

graph = helper.make_graph(
    [helper.make_node("MatMul", ["X", "W"], ["XW"]), helper.make_node("Add", ["XW", "B"], ["S"]),
     helper.make_node("Relu", ["S"], ["Y"])],
    "install_test",
    [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4])],
    [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
onnx.save(model, os.path.join(out, "model.onnx"))
for name, array, file in (("X", x, "input_0.pb"), ("Y", y, "output_0.pb")):
    with open(os.path.join(out, "test_data_set_0", file), "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())
