"""Compile a model for AotCpu once, then every later start loads the _ctx.onnx (README "Install"; tests/install
runs it with the installed wheel). Usage: python3 compile_and_load.py MODEL.onnx"""
import os
import sys

import epctx as ort
import numpy as np

model = sys.argv[1]
ctx = os.path.splitext(model)[0] + "_ctx.onnx"
so = ort.SessionOptions()
so.add_provider("AotCpuExecutionProvider", {})
if not os.path.exists(ctx):  # once: MODEL_ctx.onnx + MODEL_ctx_aotcpu.bin
    ort.ModelCompiler(so, model).compile_to_file(ctx)
sess = ort.InferenceSession(ctx, so)  # later starts: milliseconds, no compile
inp = sess.get_inputs()[0]
out = sess.run(None, {inp.name: np.ones(inp.shape, np.float32)})
print(f"{ctx}: {sess.get_outputs()[0].name} sums to {out[0].sum(dtype=np.float64):.6g}")
