#!/usr/bin/python3
"""GPT-style decoder as two graphs (prefill + decode) sharing one external weights file.

    /usr/bin/python3 tests/models/make_decoder.py --out DIR [--preset small|bench]
        [--layers L --d-model D --heads H --vocab V --ffn F --max-seq S --seed N] [--head-seed N]

Writes
    DIR/decoder.weights  all float weights (ONNX external data: location/offset/length), written once
    DIR/prefill.onnx     input_ids int64 [1,"seq"] -> logits [1,"seq",V],
                         present_key_i / present_value_i [1,H,"seq",D/H] for each layer i
    DIR/decode.onnx      input_ids int64 [1,1], past_key_i / past_value_i [1,H,"past",D/H]
                         -> logits [1,1,V], present_key_i / present_value_i [1,H,"total",D/H] ("total" = past+1)

Both graphs use the same initializer names and point at the same bytes of decoder.weights.

With --head-seed N (a variant for partial weight sharing) it also writes
    DIR/headN.weights       only lm_head.weight, drawn with seed N (same shape and scale)
    DIR/prefill_headN.onnx  prefill whose lm_head.weight points into headN.weights and every other weight into
                            decoder.weights; graph name decoder_prefill_headN (so its partition names differ)
The other files are byte-identical to a run without the option.
Default domain, opset 17, IR version 8. Ops: Shape/Add/Squeeze/Range (position ids), Gather (token and position
embeddings), LayerNormalization, MatMul + Add (Q, K, V, output projection, MLP), Reshape, Transpose, Mul (1/sqrt(d)),
Slice + Add (constant causal mask sliced to the sequence), Softmax, Concat (past + new KV, decode) or Identity
(presents, prefill), Div/Erf/Add/Mul (exact GELU), residual Add, final LayerNormalization, LM head MatMul.
Both models pass onnx.checker with full_check semantics.
"""
import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from modelutil import ExternalWeights, check_model_full, const, make_model, save_model  # noqa: E402

PRESETS = {
    # CI: ~2.7 MB of weights, prefill+decode run in milliseconds.
    "small": dict(layers=2, d_model=128, heads=4, vocab=1000, ffn=512, max_seq=128),
    # Benchmark: ~107 MB of weights (6 x (4*512^2 + 2*512*2048) + 2*512*8192 floats + embeddings).
    "bench": dict(layers=6, d_model=512, heads=8, vocab=8192, ffn=2048, max_seq=256),
}

WEIGHTS_FILE = "decoder.weights"
MASK_VALUE = -1e9


def make_weights(cfg, seed):
    """Deterministic weights scaled so that activations, attention scores and logits are O(1)."""
    rng = np.random.default_rng(seed)
    L, D, F, V, S = cfg["layers"], cfg["d_model"], cfg["ffn"], cfg["vocab"], cfg["max_seq"]
    w = ExternalWeights(WEIGHTS_FILE)

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    w.add("wte", normal((V, D), 1.0))
    w.add("wpe", normal((S, D), 0.5))
    mask = np.triu(np.full((S, S), MASK_VALUE, dtype=np.float32), k=1)  # row i may see columns <= i
    w.add("causal_mask", mask)
    for i in range(L):
        p = f"h{i}."
        w.add(p + "ln_1.weight", (1.0 + normal((D,), 0.1)))
        w.add(p + "ln_1.bias", normal((D,), 0.1))
        for n in ("q", "k", "v"):
            w.add(p + f"attn.{n}_proj.weight", normal((D, D), D ** -0.5))
            w.add(p + f"attn.{n}_proj.bias", normal((D,), 0.1))
        w.add(p + "attn.out_proj.weight", normal((D, D), D ** -0.5))
        w.add(p + "attn.out_proj.bias", normal((D,), 0.1))
        w.add(p + "ln_2.weight", (1.0 + normal((D,), 0.1)))
        w.add(p + "ln_2.bias", normal((D,), 0.1))
        w.add(p + "mlp.fc.weight", normal((D, F), D ** -0.5))
        w.add(p + "mlp.fc.bias", normal((F,), 0.1))
        w.add(p + "mlp.proj.weight", normal((F, D), F ** -0.5))
        w.add(p + "mlp.proj.bias", normal((D,), 0.1))
    w.add("ln_f.weight", (1.0 + normal((D,), 0.1)))
    w.add("ln_f.bias", normal((D,), 0.1))
    w.add("lm_head.weight", normal((D, V), D ** -0.5))
    return w


def make_head(cfg, seed):
    """lm_head.weight alone, drawn like the original (std D^-0.5) from its own generator."""
    rng = np.random.default_rng(seed)
    D, V = cfg["d_model"], cfg["vocab"]
    w = ExternalWeights(f"head{seed}.weights")
    w.add("lm_head.weight", (rng.standard_normal((D, V)) * D ** -0.5).astype(np.float32))
    return w


class HeadVariant:
    """The decoder's initializers with lm_head.weight taken from another ExternalWeights."""

    def __init__(self, weights, head):
        self.weights, self.head = weights, head

    def all_initializers(self):
        return [self.head.initializer(n) if n in self.head.tensors else self.weights.initializer(n)
                for n in self.weights.tensors]


def build_graph(cfg, weights, decode, name=None):
    L, D, H, V = cfg["layers"], cfg["d_model"], cfg["heads"], cfg["vocab"]
    hd = D // H
    nodes = []
    counter = [0]

    def node(op, inputs, outputs=None, name=None, **attrs):
        counter[0] += 1
        if outputs is None:
            outputs = [f"{name or op.lower()}_{counter[0]}_out"]
        nodes.append(helper.make_node(op, inputs, outputs, name=name or f"{op}_{counter[0]}", **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    inline = [
        const("one_scalar", 1),
        const("axes_0", [0]),
        const("axes_1", [1]),
        const("zero_1d", [0]),
        const("shape_bshd", [0, -1, H, hd]),
        const("shape_bsd", [0, -1, D]),
        const("attn_scale", 1.0 / np.sqrt(hd), np.float32),
        const("sqrt2", np.sqrt(2.0), np.float32),
        const("half", 0.5, np.float32),
        const("one_f", 1.0, np.float32),
    ]

    seq_name = "seq"
    if decode:
        inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 1])]
        kv_in_shape = [1, H, "past", hd]
        for i in range(L):
            inputs.append(helper.make_tensor_value_info(f"past_key_{i}", TensorProto.FLOAT, kv_in_shape))
            inputs.append(helper.make_tensor_value_info(f"past_value_{i}", TensorProto.FLOAT, kv_in_shape))
        seq_name = 1
        kv_out_shape = [1, H, "total", hd]
    else:
        inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"])]
        kv_out_shape = [1, H, "seq", hd]

    # Positions: past_len .. past_len+seq-1 (past_len = 0 in prefill, taken from the KV cache in decode).
    seq_1d = node("Shape", ["input_ids"], ["seq_1d"], name="seq_len", start=1, end=2)
    if decode:
        past_1d = node("Shape", ["past_key_0"], ["past_1d"], name="past_len", start=2, end=3)
    else:
        past_1d = "zero_1d"
    end_1d = node("Add", [past_1d, seq_1d], ["end_1d"], name="end_pos")
    past_0d = node("Squeeze", [past_1d, "axes_0"], ["past_0d"], name="past_scalar")
    end_0d = node("Squeeze", [end_1d, "axes_0"], ["end_0d"], name="end_scalar")
    pos = node("Range", [past_0d, end_0d, "one_scalar"], ["position_ids"], name="position_ids")
    tok_emb = node("Gather", ["wte", "input_ids"], ["tok_emb"], name="wte_gather", axis=0)
    pos_emb = node("Gather", ["wpe", pos], ["pos_emb"], name="wpe_gather", axis=0)
    x = node("Add", [tok_emb, pos_emb], ["embeddings"], name="embed_add")

    # Causal mask rows past_len..end-1, columns 0..end-1 -> [seq, total]
    mask_rows = node("Slice", ["causal_mask", past_1d, end_1d, "axes_0"], ["mask_rows"], name="mask_rows")
    mask = node("Slice", [mask_rows, "zero_1d", end_1d, "axes_1"], ["attn_mask"], name="mask_cols")

    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, seq_name, V])]
    for i in range(L):
        p = f"h{i}."
        pn = f"h{i}_"
        h = node("LayerNormalization", [x, p + "ln_1.weight", p + "ln_1.bias"], [pn + "ln_1"],
                 name=pn + "ln_1", axis=-1, epsilon=1e-5)
        heads = {}
        for n in ("q", "k", "v"):
            mm = node("MatMul", [h, p + f"attn.{n}_proj.weight"], [pn + f"{n}_mm"], name=pn + f"{n}_matmul")
            b = node("Add", [mm, p + f"attn.{n}_proj.bias"], [pn + f"{n}"], name=pn + f"{n}_bias")
            r = node("Reshape", [b, "shape_bshd"], [pn + f"{n}_bshd"], name=pn + f"{n}_reshape")
            heads[n] = node("Transpose", [r], [pn + f"{n}_bhsd"], name=pn + f"{n}_transpose", perm=[0, 2, 1, 3])
        if decode:
            k = node("Concat", [f"past_key_{i}", heads["k"]], [f"present_key_{i}"], name=pn + "k_concat", axis=2)
            v = node("Concat", [f"past_value_{i}", heads["v"]], [f"present_value_{i}"], name=pn + "v_concat",
                     axis=2)
        else:
            k = node("Identity", [heads["k"]], [f"present_key_{i}"], name=pn + "present_key")
            v = node("Identity", [heads["v"]], [f"present_value_{i}"], name=pn + "present_value")
        outputs.append(helper.make_tensor_value_info(f"present_key_{i}", TensorProto.FLOAT, kv_out_shape))
        outputs.append(helper.make_tensor_value_info(f"present_value_{i}", TensorProto.FLOAT, kv_out_shape))
        kt = node("Transpose", [k], [pn + "k_t"], name=pn + "k_t", perm=[0, 1, 3, 2])
        scores = node("MatMul", [heads["q"], kt], [pn + "scores"], name=pn + "qk_matmul")
        scaled = node("Mul", [scores, "attn_scale"], [pn + "scores_scaled"], name=pn + "qk_scale")
        masked = node("Add", [scaled, mask], [pn + "scores_masked"], name=pn + "qk_mask")
        probs = node("Softmax", [masked], [pn + "probs"], name=pn + "softmax", axis=-1)
        ctx = node("MatMul", [probs, v], [pn + "ctx"], name=pn + "pv_matmul")
        ctx_t = node("Transpose", [ctx], [pn + "ctx_bshd"], name=pn + "ctx_transpose", perm=[0, 2, 1, 3])
        ctx_r = node("Reshape", [ctx_t, "shape_bsd"], [pn + "ctx_bsd"], name=pn + "ctx_reshape")
        o = node("MatMul", [ctx_r, p + "attn.out_proj.weight"], [pn + "o_mm"], name=pn + "o_matmul")
        o = node("Add", [o, p + "attn.out_proj.bias"], [pn + "o"], name=pn + "o_bias")
        x = node("Add", [x, o], [pn + "resid_attn"], name=pn + "resid_attn")

        h2 = node("LayerNormalization", [x, p + "ln_2.weight", p + "ln_2.bias"], [pn + "ln_2"],
                  name=pn + "ln_2", axis=-1, epsilon=1e-5)
        f = node("MatMul", [h2, p + "mlp.fc.weight"], [pn + "fc_mm"], name=pn + "fc_matmul")
        f = node("Add", [f, p + "mlp.fc.bias"], [pn + "fc"], name=pn + "fc_bias")
        # GELU, exact (Erf) form as exported by PyTorch: x * 0.5 * (1 + erf(x / sqrt(2)))
        g = node("Div", [f, "sqrt2"], [pn + "gelu_div"], name=pn + "gelu_div")
        g = node("Erf", [g], [pn + "gelu_erf"], name=pn + "gelu_erf")
        g = node("Add", [g, "one_f"], [pn + "gelu_add"], name=pn + "gelu_add")
        g = node("Mul", [f, g], [pn + "gelu_mul"], name=pn + "gelu_mul")
        g = node("Mul", [g, "half"], [pn + "gelu"], name=pn + "gelu_half")
        m = node("MatMul", [g, p + "mlp.proj.weight"], [pn + "proj_mm"], name=pn + "proj_matmul")
        m = node("Add", [m, p + "mlp.proj.bias"], [pn + "proj"], name=pn + "proj_bias")
        x = node("Add", [x, m], [pn + "resid_mlp"], name=pn + "resid_mlp")

    xf = node("LayerNormalization", [x, "ln_f.weight", "ln_f.bias"], ["ln_f"], name="ln_f", axis=-1, epsilon=1e-5)
    node("MatMul", [xf, "lm_head.weight"], ["logits"], name="lm_head")

    # Drop inline constants this graph does not use (prefill has no past_len Shape, etc.).
    used = {i for n in nodes for i in n.input}
    inline = [t for t in inline if t.name in used]
    graph = helper.make_graph(nodes, name or ("decoder_decode" if decode else "decoder_prefill"), inputs, outputs,
                              initializer=weights.all_initializers() + inline)
    return graph


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="small")
    for k in ("layers", "d-model", "heads", "vocab", "ffn", "max-seq"):
        ap.add_argument("--" + k, type=int)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--head-seed", type=int,
                    help="also write prefill_headN.onnx + headN.weights: lm_head.weight drawn with this seed")
    ap.add_argument("--no-check", action="store_true", help="skip onnx.checker (faster for huge models)")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    cfg = dict(PRESETS[args.preset])
    for k in ("layers", "d_model", "heads", "vocab", "ffn", "max_seq"):
        v = getattr(args, k)
        if v is not None:
            cfg[k] = v
    if cfg["d_model"] % cfg["heads"]:
        sys.exit("make_decoder: --d-model must be divisible by --heads")
    os.makedirs(args.out, exist_ok=True)
    weights = make_weights(cfg, args.seed)
    wpath = weights.write(args.out)
    made = [wpath]
    for name, decode in (("prefill", False), ("decode", True)):
        model = make_model(build_graph(cfg, weights, decode))
        helper.set_model_props(model, {"epctx.test.decoder_config": repr(sorted(cfg.items()))})
        path = os.path.join(args.out, name + ".onnx")
        save_model(model, path)
        if not args.no_check:
            check_model_full(path)
        made.append(path)
    if args.head_seed is not None:
        head = make_head(cfg, args.head_seed)
        made.append(head.write(args.out))
        model = make_model(build_graph(cfg, HeadVariant(weights, head), False,
                                       name=f"decoder_prefill_head{args.head_seed}"))
        helper.set_model_props(model, {"epctx.test.decoder_config": repr(sorted(cfg.items())),
                                       "epctx.test.head_seed": str(args.head_seed)})
        path = os.path.join(args.out, f"prefill_head{args.head_seed}.onnx")
        save_model(model, path)
        if not args.no_check:
            check_model_full(path)
        made.append(path)
    n_params = sum(int(np.prod(t[3])) for n, t in weights.tensors.items() if n != "causal_mask")
    print(f"make_decoder: {cfg} params={n_params} weights={os.path.getsize(wpath)} bytes")
    for m in made:
        print("  wrote", m)
    return cfg


if __name__ == "__main__":
    main()
