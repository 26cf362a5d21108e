#!/usr/bin/python3
"""ONNX backend test-case folders for the generated models, expected outputs from onnxruntime-node 1.30.

    /usr/bin/python3 tests/models/make_cases.py --models DIR [--out DIR/cases]
        [--prefill-seq 16,5] [--decode-past 16,5] [--cnn-batches 1] [--seed N]

Needs DIR/prefill.onnx, DIR/decode.onnx, DIR/decoder.weights (make_decoder.py) and DIR/cnn.onnx (make_cnn.py),
and tests/ort/node_modules (scripts/make_test_models.sh installs it). Writes

    OUT/decoder_prefill/{model.onnx, decoder.weights, test_data_set_K/{input_0.pb, output_N.pb}}
    OUT/decoder_decode/{model.onnx, decoder.weights, test_data_set_K/{input_N.pb, output_N.pb}}
    OUT/cnn/{model.onnx, test_data_set_0/{input_0.pb, output_0.pb}}

decoder.weights is hard-linked (copied if linking fails) into each decoder case folder, since a runtime may refuse
external data outside the model's folder. Inputs are seeded random (token ids, image); the decode past KV is the
`present_*` output of a real ORT prefill run over the preceding tokens. Outputs are written by tests/ort/run_model.js
(onnxruntime-node, graph optimizations disabled). As a self-check the decode logits must match the last row of an
ORT prefill over the same tokens plus the new one.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from modelutil import link_or_copy  # noqa: E402

ORT_DIR = os.path.normpath(os.path.join(HERE, "..", "ort"))
RUN_MODEL = os.path.join(ORT_DIR, "run_model.js")


def ort_available():
    return os.path.isdir(os.path.join(ORT_DIR, "node_modules", "onnxruntime-node"))


def run_ort(model, data_dir):
    """Runs onnxruntime-node on data_dir/input_N.pb, writes data_dir/output_N.pb, returns the outputs in order."""
    subprocess.run(["node", RUN_MODEL, model, data_dir], check=True, stdout=subprocess.DEVNULL)
    return read_outputs(data_dir)


def read_outputs(data_dir):
    files = sorted(glob.glob(os.path.join(data_dir, "output_*.pb")),
                   key=lambda p: int(os.path.basename(p)[7:-3]))
    outs = []
    for f in files:
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        outs.append((t.name, numpy_helper.to_array(t)))
    return outs


def write_inputs(data_dir, model, arrays):
    """arrays in graph-input order; TensorProto names = graph input names."""
    os.makedirs(data_dir, exist_ok=True)
    for old in glob.glob(os.path.join(data_dir, "*.pb")):
        os.remove(old)
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    assert len(names) == len(arrays), (names, len(arrays))
    for n, (name, arr) in enumerate(zip(names, arrays)):
        t = numpy_helper.from_array(np.ascontiguousarray(arr), name)
        with open(os.path.join(data_dir, f"input_{n}.pb"), "wb") as fh:
            fh.write(t.SerializeToString())


def check_outputs(data_dir, model):
    names = [o.name for o in model.graph.output]
    outs = read_outputs(data_dir)
    got = [n for n, _ in outs]
    if got != names:
        raise SystemExit(f"make_cases: {data_dir}: outputs {got} != graph outputs {names}")
    for n, a in outs:
        if not np.all(np.isfinite(a)):
            raise SystemExit(f"make_cases: {data_dir}: non-finite values in {n}")
    return outs


def fresh_case(folder, model_src, extra_files=()):
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    shutil.copyfile(model_src, os.path.join(folder, "model.onnx"))
    for f in extra_files:
        link_or_copy(f, os.path.join(folder, os.path.basename(f)))
    return os.path.join(folder, "model.onnx")


def prefill_presents(prefill_model_path, prefill_model, tokens, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    write_inputs(d, prefill_model, [tokens])
    outs = run_ort(prefill_model_path, d)
    return outs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", required=True)
    ap.add_argument("--out")
    ap.add_argument("--prefill-seq", default="16,5", help="comma list: one test_data_set per sequence length")
    ap.add_argument("--decode-past", default=None, help="comma list of past lengths (default: --prefill-seq)")
    ap.add_argument("--seed", type=int, default=777)
    ap.add_argument("--only", choices=["decoder", "cnn"], default=None)
    args = ap.parse_args(argv)

    if not ort_available():
        raise SystemExit(f"make_cases: onnxruntime-node missing: run `cd {ORT_DIR} && npm ci --ignore-scripts`")
    out = args.out or os.path.join(args.models, "cases")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    made = []

    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "decoder"):
            weights = os.path.join(args.models, "decoder.weights")
            src_prefill = os.path.join(args.models, "prefill.onnx")
            src_decode = os.path.join(args.models, "decode.onnx")
            prefill = onnx.load(src_prefill, load_external_data=False)
            decode = onnx.load(src_decode, load_external_data=False)
            vocab = prefill.graph.output[0].type.tensor_type.shape.dim[2].dim_value

            case = os.path.join(out, "decoder_prefill")
            model_path = fresh_case(case, src_prefill, [weights])
            for k, seq in enumerate(int(s) for s in args.prefill_seq.split(",")):
                d = os.path.join(case, f"test_data_set_{k}")
                tokens = rng.integers(0, vocab, size=(1, seq), dtype=np.int64)
                write_inputs(d, prefill, [tokens])
                run_ort(model_path, d)
                check_outputs(d, prefill)
            made.append(case)

            case = os.path.join(out, "decoder_decode")
            model_path = fresh_case(case, src_decode, [weights])
            pasts = args.decode_past or args.prefill_seq
            for k, past in enumerate(int(s) for s in pasts.split(",")):
                d = os.path.join(case, f"test_data_set_{k}")
                tokens = rng.integers(0, vocab, size=(1, past + 1), dtype=np.int64)
                presents = prefill_presents(model_path.replace("decoder_decode", "decoder_prefill"), prefill,
                                            tokens[:, :past], tmp)
                write_inputs(d, decode, [tokens[:, past:]] + [a for _, a in presents[1:]])
                run_ort(model_path, d)
                outs = check_outputs(d, decode)
                # Self-check: decode(past KV, t) == last row of prefill(tokens + t).
                full = prefill_presents(model_path.replace("decoder_decode", "decoder_prefill"), prefill, tokens,
                                        tmp)
                ref = full[0][1][:, -1:, :]
                err = np.max(np.abs(outs[0][1] - ref)) / max(1e-6, np.max(np.abs(ref)))
                if err > 1e-4:
                    raise SystemExit(f"make_cases: decode/prefill mismatch at past={past}: rel err {err:.3g}")
                for (_, a), (_, b) in zip(outs[1:], full[1:]):
                    if a.shape != b.shape or np.max(np.abs(a - b)) > 1e-4 * max(1.0, np.max(np.abs(b))):
                        raise SystemExit(f"make_cases: decode/prefill KV mismatch at past={past}")
            made.append(case)

        if args.only in (None, "cnn"):
            src = os.path.join(args.models, "cnn.onnx")
            cnn = onnx.load(src)
            case = os.path.join(out, "cnn")
            model_path = fresh_case(case, src)
            dims = [d.dim_value for d in cnn.graph.input[0].type.tensor_type.shape.dim]
            d = os.path.join(case, "test_data_set_0")
            write_inputs(d, cnn, [rng.standard_normal(dims).astype(np.float32)])
            run_ort(model_path, d)
            check_outputs(d, cnn)
            made.append(case)

    for m in made:
        sets = sorted(os.path.basename(p) for p in glob.glob(os.path.join(m, "test_data_set_*")))
        print(f"make_cases: {m} ({', '.join(sets)})")
    return made


if __name__ == "__main__":
    main()
