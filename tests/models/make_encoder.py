#!/usr/bin/python3
"""A MiniLM-like sentence encoder shaped as PyTorch exports it (issue 27 item 6), with ORT reference cases.

    /usr/bin/python3 tests/models/make_encoder.py --out DIR [--shapes 2x7,1x16,3x5] [--seed N]

Writes DIR/encoder.onnx (opset 17, weights inline, about 0.5 MB) and one ONNX backend test folder per shape,
DIR/cases/encoder_BxS/{model.onnx, test_data_set_0/{input_N.pb, output_N.pb}}, whose outputs come from
onnxruntime-node 1.30 (tests/ort/run_model.js, graph optimizations disabled).

The graph (2 layers, hidden 64, 4 heads, vocab 1000, FFN 128; batch and seq free):
  inputs input_ids, attention_mask, token_type_ids: int64 ["batch", "seq"]
  embeddings: Gather(word) + Gather(position, Slice of a [1, 512] position-id buffer to Shape(input_ids)[1]) +
    Gather(token type), LayerNormalization
  extended mask: Unsqueeze(mask, [1, 2]) -> Cast float -> Sub from 1 -> Mul by float's lowest value
  per layer: Q/K/V MatMul + Add, Reshape to Concat(Shape()[0:2], [H, D]) -> Transpose, QK^T, Div sqrt(D), Add mask,
    Softmax, MatMul V, Transpose, Reshape back, out-proj, residual, LayerNormalization, FFN with the Erf GELU,
    residual, LayerNormalization
  mean pooling: Unsqueeze(mask, -1) -> Expand(Shape(hidden)) -> Cast float -> Mul, ReduceSum over seq, Clip(min
    1e-9) of the mask's sum, Div; then F.normalize: ReduceL2(axis 1, keepdims 1) -> Clip(min 1e-12) ->
    Expand(Shape) -> Div.
  outputs: last_hidden_state float [batch, seq, 64], sentence_embedding float [batch, 64]
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_MODEL = os.path.normpath(os.path.join(HERE, "..", "ort", "run_model.js"))

HIDDEN, HEADS, FFN, VOCAB, LAYERS, MAX_POS = 64, 4, 128, 1000, 2, 512


class Builder:
    def __init__(self, rng):
        self.rng = rng
        self.nodes, self.inits = [], []
        self.count = 0

    def name(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def const(self, base, array):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def weight(self, base, shape, scale=0.08):
        return self.const(base, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, op_type, inputs, outputs=1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=outs[0], **attrs))
        return outs[0] if outputs == 1 else outs

    def i64(self, values):
        return self.const("i64", np.array(values, dtype=np.int64))

    def f32(self, value):
        return self.const("f32", np.array(value, dtype=np.float32))

    def layer_norm(self, x, prefix):
        g = self.const(prefix + "_g", (1 + 0.1 * self.rng.standard_normal(HIDDEN)).astype(np.float32))
        b = self.weight(prefix + "_b", [HIDDEN], 0.1)
        return self.op("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-12)

    def linear(self, x, n_in, n_out, prefix):
        w = self.weight(prefix + "_w", [n_in, n_out])
        b = self.weight(prefix + "_b", [n_out], 0.02)
        return self.op("Add", [self.op("MatMul", [x, w]), b])


def build(seed):
    rng = np.random.default_rng(seed)
    b = Builder(rng)
    head_dim = HIDDEN // HEADS
    # Embeddings.
    word = b.weight("word_embeddings", [VOCAB, HIDDEN], 0.5)
    pos_table = b.weight("position_embeddings", [MAX_POS, HIDDEN], 0.5)
    type_table = b.weight("token_type_embeddings", [2, HIDDEN], 0.5)
    pos_buffer = b.const("position_ids", np.arange(MAX_POS, dtype=np.int64).reshape(1, MAX_POS))
    ids_shape = b.op("Shape", ["input_ids"])
    seq_len = b.op("Gather", [ids_shape, b.i64(1)], axis=0)
    seq_end = b.op("Unsqueeze", [seq_len, b.i64([0])])
    pos_ids = b.op("Slice", [pos_buffer, b.i64([0]), seq_end, b.i64([1])])
    emb = b.op("Add", [b.op("Gather", [word, "input_ids"]), b.op("Gather", [type_table, "token_type_ids"])])
    emb = b.op("Add", [emb, b.op("Gather", [pos_table, pos_ids])])
    h = b.layer_norm(emb, "emb_ln")
    # Extended attention mask: (1 - mask) * finfo(float32).min, [B, 1, 1, S].
    m = b.op("Unsqueeze", ["attention_mask", b.i64([1, 2])])
    m = b.op("Cast", [m], to=TensorProto.FLOAT)
    m = b.op("Sub", [b.f32(1.0), m])
    ext_mask = b.op("Mul", [m, b.f32(np.finfo(np.float32).min)])
    for layer in range(LAYERS):
        p = f"l{layer}"
        shape = b.op("Shape", [h])
        bs = b.op("Slice", [shape, b.i64([0]), b.i64([2]), b.i64([0])])  # [B, S]
        split_shape = b.op("Concat", [bs, b.i64([HEADS, head_dim])], axis=0)

        def heads(x):
            return b.op("Transpose", [b.op("Reshape", [x, split_shape])], perm=[0, 2, 1, 3])

        q = heads(b.linear(h, HIDDEN, HIDDEN, p + "_q"))
        k = heads(b.linear(h, HIDDEN, HIDDEN, p + "_k"))
        v = heads(b.linear(h, HIDDEN, HIDDEN, p + "_v"))
        kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
        s = b.op("Div", [b.op("MatMul", [q, kt]), b.f32(np.sqrt(head_dim))])
        s = b.op("Softmax", [b.op("Add", [s, ext_mask])], axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [s, v])], perm=[0, 2, 1, 3])
        merged = b.op("Concat", [bs, b.i64([HIDDEN])], axis=0)
        ctx = b.op("Reshape", [ctx, merged])
        h = b.layer_norm(b.op("Add", [b.linear(ctx, HIDDEN, HIDDEN, p + "_o"), h]), p + "_ln1")
        f = b.linear(h, HIDDEN, FFN, p + "_ffn1")
        gelu = b.op("Mul", [b.op("Mul", [f, b.op("Add", [b.op("Erf", [b.op("Div", [f, b.f32(np.sqrt(2.0))])]),
                                                         b.f32(1.0)])]), b.f32(0.5)])
        h = b.layer_norm(b.op("Add", [b.linear(gelu, FFN, HIDDEN, p + "_ffn2"), h]), p + "_ln2")
    last = b.op("Identity", [h])
    # Mean pooling.
    mask_e = b.op("Unsqueeze", ["attention_mask", b.i64([-1])])
    mask_e = b.op("Expand", [mask_e, b.op("Shape", [last])])
    mask_f = b.op("Cast", [mask_e], to=TensorProto.FLOAT)
    summed = b.op("ReduceSum", [b.op("Mul", [last, mask_f]), b.i64([1])], keepdims=0)
    counts = b.op("ReduceSum", [mask_f, b.i64([1])], keepdims=0)
    counts = b.op("Clip", [counts, b.f32(1e-9)])
    pooled = b.op("Div", [summed, counts])
    # F.normalize(p=2, dim=1).
    norm = b.op("ReduceL2", [pooled], axes=[1], keepdims=1)
    norm = b.op("Clip", [norm, b.f32(1e-12)])
    norm = b.op("Expand", [norm, b.op("Shape", [pooled])])
    emb_out = b.op("Div", [pooled, norm])
    b.nodes.append(helper.make_node("Identity", [last], ["last_hidden_state"], name="out_last"))
    b.nodes.append(helper.make_node("Identity", [emb_out], ["sentence_embedding"], name="out_emb"))
    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
            for n in ("input_ids", "attention_mask", "token_type_ids")]
    outs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", HIDDEN]),
            helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", HIDDEN])]
    graph = helper.make_graph(b.nodes, "minilm_like_encoder", ints, outs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="epctx-tests")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def make_inputs(rng, batch, seq):
    ids = rng.integers(1, VOCAB, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    for r in range(1, batch):  # padded rows: the last tokens masked out
        keep = max(1, seq - 2 * r)
        mask[r, keep:] = 0
        ids[r, keep:] = 0
    types = np.zeros((batch, seq), dtype=np.int64)
    types[:, seq // 2:] = 1
    return [("input_ids", ids), ("attention_mask", mask), ("token_type_ids", types)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="2x7,1x16,3x5")
    ap.add_argument("--seed", type=int, default=27)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    model = build(a.seed)
    path = os.path.join(a.out, "encoder.onnx")
    onnx.save(model, path)
    rng = np.random.default_rng(a.seed + 1)
    for shape in a.shapes.split(","):
        batch, seq = (int(x) for x in shape.split("x"))
        case = os.path.join(a.out, "cases", f"encoder_{batch}x{seq}")
        data = os.path.join(case, "test_data_set_0")
        os.makedirs(data, exist_ok=True)
        onnx.save(model, os.path.join(case, "model.onnx"))
        for i, (name, arr) in enumerate(make_inputs(rng, batch, seq)):
            with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(arr, name).SerializeToString())
        subprocess.run(["node", RUN_MODEL, os.path.join(case, "model.onnx"), data], check=True,
                       stdout=subprocess.DEVNULL)
        t = onnx.TensorProto()
        with open(os.path.join(data, "output_1.pb"), "rb") as f:
            t.ParseFromString(f.read())
        e = numpy_helper.to_array(t)
        if e.shape != (batch, HIDDEN) or not np.all(np.isfinite(e)) or \
                not np.allclose(np.linalg.norm(e, axis=1), 1, atol=1e-5):
            sys.exit(f"make_encoder: ORT's sentence_embedding for {shape} is not unit rows of [{batch}, {HIDDEN}]")
    print(f"make_encoder: wrote {path} and {len(a.shapes.split(','))} cases")


if __name__ == "__main__":
    main()
