#!/usr/bin/python3
"""Greedy generation on the small decoder: epctx (build/bin/epctx_generate) against onnxruntime-node 1.30
(tests/ort/generate.js), step by step.

    /usr/bin/python3 tests/generate/generate_matches_ort.py --generate build/bin/epctx_generate --work DIR
        --case cpu|aotcpu|aotcpu_static_prefill|aotcpu_dynamic|aotcpu_dynamic_ctx|aotcpu_dynamic_shared|errors [--ep-lib build/lib/libepctx_aotcpu.so] [--prompt-len 64 --tokens 32]
    /usr/bin/python3 tests/generate/generate_matches_ort.py --compare A.dump B.dump     # compare two dumps only

cpu:    epctx's CPU EP vs ORT (graphOptimizationLevel 'disabled': the graph's literal semantics), both 1 thread.
aotcpu: the same with AotCpuExecutionProvider appended (--ep-lib); the decoder's shapes are free, so today most
        nodes stay on the CPU EP; the outputs must match all the same.
Both check, at every step (prefill + tokens-1 decode steps): the same token id, the same past length, and the logits
row within rtol 1e-4, atol 1e-4 (|a - b| <= atol + rtol * |b|, b = ORT); the same prompt and tokens in both JSON lines
as in the dumps; and that the comparison itself catches a wrong dump (ORT's dump with one logit of one step moved by
1e-2, and with one token changed, must both be reported as different).
aotcpu_static_prefill: AotCpu appended and the prefill session's "seq" pinned to the prompt length
        (--prefill-dim seq:L), so AotCpu compiles prefill (it must take at least one prefill node, or the case fails as
        vacuous); decode stays free. Same checks.
aotcpu_dynamic: AotCpu appended with ep.aotcpuexecutionprovider.dynamic_shapes=1: both graphs keep "seq"/"past"
        free, AotCpu takes every node of both sessions (the case fails otherwise) and compiles each new input shape
        at run time (every decode step is one). Same checks.
aotcpu_dynamic_ctx: prefill and decode each compiled ONCE with their dims free (`epctx compile -e aotcpu -i
        "dynamic_shapes|1 shape_profiles|..."`, the profile packing the weights into the binary), then the generation
        runs from the two _ctx.onnx with session.disable_model_compile=1: every partition must come from an EPContext
        node, none on the CPU EP, `epctx inspect` must call the graphs dynamic, and no new shape may pack weights.
        Same checks.
aotcpu_dynamic_shared: both graphs with their dims free compiled as ONE weight-sharing group (`epctx share-compile
        -i "dynamic_shapes|1 shape_profiles|input_ids:1xL"`, the profile kept for prefill only): one binary holding two
        dynamic graphs; the generation runs with ep.share_ep_contexts=1,
        the decode session taking its graph from the group (nothing mapped again). Same checks.
errors: bad input exits 2 with "epctx_generate: <message>" and no signal: a missing model, models swapped, a model that
        is not a decoder, a file that is not ONNX, --vocab that disagrees with the logits, a prompt id outside the
        vocab, a prompt longer than the model's positions, a bad option.
The decoder: tests/models/make_decoder.py --preset small --max-seq 128 into DIR/decoder (made when missing).
Exit 0 when everything holds, 1 with the reasons otherwise.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORT_DIR = os.path.join(ROOT, "tests", "ort")
RTOL = 1e-4
ATOL = 1e-4
MAGIC = b"EPCTXGEN"


def read_dump(path):
    """(vocab, records): records is a numpy structured array (step, past, token, logits[V])."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 16 or data[:8] != MAGIC:
        raise ValueError(f"{path}: not a generate dump (no {MAGIC!r} header)")
    version, vocab = np.frombuffer(data, "<u4", 2, 8)
    if version != 1:
        raise ValueError(f"{path}: dump version {version}, expected 1")
    rec = np.dtype([("step", "<i4"), ("past", "<i4"), ("token", "<i8"), ("logits", "<f4", (int(vocab),))])
    body = len(data) - 16
    if body % rec.itemsize:
        raise ValueError(f"{path}: {body} bytes after the header is not a whole number of {rec.itemsize}-byte records")
    return int(vocab), np.frombuffer(data, rec, offset=16)


def compare_dumps(ref_path, got_path, steps=None):
    """Differences between two dumps as a list of strings (empty: they match)."""
    try:
        v_ref, ref = read_dump(ref_path)
        v_got, got = read_dump(got_path)
    except (OSError, ValueError) as e:
        return [str(e)]
    if v_ref != v_got:
        return [f"vocab {v_got} vs {v_ref}"]
    errs = []
    if steps is not None and len(ref) != steps:
        errs.append(f"{ref_path}: {len(ref)} steps, expected {steps}")
    if len(got) != len(ref):
        errs.append(f"{got_path}: {len(got)} steps vs {len(ref)} in {ref_path}")
    for i in range(min(len(ref), len(got))):
        r, g = ref[i], got[i]
        where = f"step {i} (past {int(r['past'])})"
        if r["step"] != i or g["step"] != i:
            errs.append(f"{where}: step fields {int(g['step'])} / {int(r['step'])}")
        if r["past"] != g["past"]:
            errs.append(f"{where}: past length {int(g['past'])} vs {int(r['past'])}")
        for name, d in (("reference", r), ("candidate", g)):
            if int(np.argmax(d["logits"])) != int(d["token"]):
                errs.append(f"{where}: {name} token {int(d['token'])} is not the argmax of its logits row")
        if r["token"] != g["token"]:
            errs.append(f"{where}: token {int(g['token'])} vs {int(r['token'])}")
        a, b = g["logits"].astype(np.float64), r["logits"].astype(np.float64)
        if not np.all(np.isfinite(a)):
            errs.append(f"{where}: non-finite logits")
            continue
        excess = np.abs(a - b) - (ATOL + RTOL * np.abs(b))
        if np.any(excess > 0):
            k = int(np.argmax(excess))
            errs.append(f"{where}: {int(np.sum(excess > 0))} logits outside rtol {RTOL} atol {ATOL}; worst column {k}: "
                        f"{a[k]!r} vs {b[k]!r}")
    return errs


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def json_line(proc, what):
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip()[:2000]}")
    return json.loads(lines[-1])


def ensure_decoder(work):
    d = os.path.join(work, "decoder")
    if not all(os.path.exists(os.path.join(d, f)) for f in ("prefill.onnx", "decode.onnx", "decoder.weights")):
        p = run(["/usr/bin/python3", os.path.join(ROOT, "tests", "models", "make_decoder.py"), "--out", d,
                 "--preset", "small", "--max-seq", "128"], env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        if p.returncode != 0:
            raise RuntimeError(f"make_decoder.py failed: {p.stderr.strip()}")
    return os.path.join(d, "prefill.onnx"), os.path.join(d, "decode.onnx")


def case_match(args, name):
    prefill, decode = ensure_decoder(args.work)
    common = ["--prefill", prefill, "--decode", decode, "--prompt-len", str(args.prompt_len), "--seed", "7",
              "--tokens", str(args.tokens), "--threads", "1", "--json"]
    ort_dump = os.path.join(args.work, "ort.dump")
    ort = json_line(run(["node", os.path.join(ORT_DIR, "generate.js"), *common, "--opt", "disabled",
                         "--dump", ort_dump], cwd=ORT_DIR), "tests/ort/generate.js")
    ep_dump = os.path.join(args.work, f"epctx_{name}.dump")
    cmd = [args.generate, *common, "--dump", ep_dump]
    errs = []
    if name == "aotcpu_dynamic_ctx":  # compile each graph once with its dims free, then run from the _ctx.onnx
        epctx = os.path.join(os.path.dirname(args.generate), "epctx")
        past = ";".join(f"past_{kv}_{i}:1x4x{args.prompt_len}x32" for i in range(2) for kv in ("key", "value"))
        profiles = {"prefill": f"input_ids:1x{args.prompt_len}", "decode": past}
        ctx = {}
        for which, model in (("prefill", prefill), ("decode", decode)):
            out = os.path.join(args.work, f"{which}_dyn_ctx.onnx")
            p = run([epctx, "compile", "-e", "aotcpu", "-i", f"dynamic_shapes|1 shape_profiles|{profiles[which]}",
                     model, "-o", out])
            if p.returncode != 0:
                raise RuntimeError(f"epctx compile of {which} failed: {p.stderr.strip()}")
            inspect = run([epctx, "inspect", out]).stdout
            if "dynamic: every input shape" not in inspect:
                errs.append(f"epctx inspect does not call the {which} graph dynamic:\n{inspect[-800:]}")
            ctx[which] = out
        cmd = [args.generate, "--prefill", ctx["prefill"], "--decode", ctx["decode"], *common[4:], "--dump", ep_dump,
               "-C", "session.disable_model_compile=1"]
    if name == "aotcpu_dynamic_shared":  # both graphs, dims free, as ONE weight-sharing group: one binary
        epctx = os.path.join(os.path.dirname(args.generate), "epctx")
        group = os.path.join(args.work, "shared")
        shutil.rmtree(group, ignore_errors=True)
        os.makedirs(group)
        for f in (prefill, decode, os.path.join(os.path.dirname(prefill), "decoder.weights")):
            if os.path.exists(f):
                shutil.copy(f, group)
        # The prompt's profile applies to prefill only (decode's input_ids is [1, 1]): skipped for decode in a group.
        p = run([epctx, "share-compile", "-e", "aotcpu", "-i",
                 f"dynamic_shapes|1 shape_profiles|input_ids:1x{args.prompt_len}",
                 os.path.join(group, "prefill.onnx") + "," + os.path.join(group, "decode.onnx")])
        if p.returncode != 0:
            raise RuntimeError(f"epctx share-compile failed: {p.stderr.strip()} {p.stdout.strip()}")
        bins = [f for f in os.listdir(group) if f.endswith("_aotcpu.bin")]
        if len(bins) != 1:
            errs.append(f"the group wrote {len(bins)} binaries, want one: {bins}")
        inspect = run([epctx, "inspect", os.path.join(group, "decode_ctx.onnx")]).stdout
        if inspect.count("dynamic: every input shape") != 2:
            errs.append(f"the group's binary does not hold two dynamic graphs:\n{inspect[-800:]}")
        if inspect.count("shape profile (built at load)") != 1:
            errs.append(f"the prompt's profile is not stored for prefill alone:\n{inspect[-800:]}")
        cmd = [args.generate, "--prefill", os.path.join(group, "prefill_ctx.onnx"), "--decode",
               os.path.join(group, "decode_ctx.onnx"), *common[4:], "--dump", ep_dump,
               "-C", "session.disable_model_compile=1", "-C", "ep.share_ep_contexts=1"]
    if name != "cpu":
        cmd += ["--ep-lib", args.ep_lib, "--ep", "AotCpuExecutionProvider", "--report"]
    if name == "aotcpu_static_prefill":
        cmd += ["--prefill-dim", f"seq:{args.prompt_len}"]
    if name == "aotcpu_dynamic":
        cmd += ["-C", "ep.aotcpuexecutionprovider.dynamic_shapes=1"]
    env = dict(os.environ, EPCTX_AOTCPU_PROFILE="1") if name == "aotcpu_dynamic_ctx" else None
    p = run(cmd, env=env) if env else run(cmd)
    ep = json_line(p, "epctx_generate")
    if name == "aotcpu_dynamic_ctx":
        shapes = [l for l in p.stderr.splitlines() if "new shape" in l]
        if not shapes:
            errs.append("no new shape was bound (EPCTX_AOTCPU_PROFILE printed none)")
        packed = [l for l in shapes if "0.0 MB of weights made" not in l]
        if packed:
            errs.append(f"a shape packed weights although the binary holds them: {packed[0]}")
    for side, j, dump in (("ORT", ort, ort_dump), ("epctx", ep, ep_dump)):
        _, recs = read_dump(dump)
        if j["tokens"] != [int(t) for t in recs["token"]]:
            errs.append(f"{side}: JSON tokens differ from its dump's")
        if len(j["decode_ms"]) != args.tokens - 1 or len(j["past_lens"]) != args.tokens - 1:
            errs.append(f"{side}: {len(j['decode_ms'])} decode times / {len(j['past_lens'])} past lengths for "
                        f"{args.tokens - 1} decode steps")
        if j["past_lens"] != list(range(args.prompt_len, args.prompt_len + args.tokens - 1)):
            errs.append(f"{side}: past lengths {j['past_lens'][:5]}... are not {args.prompt_len}, "
                        f"{args.prompt_len + 1}, ...")
    if ort["prompt"] != ep["prompt"]:
        errs.append(f"the prompts differ: epctx {ep['prompt'][:8]}... vs ORT {ort['prompt'][:8]}...")
    errs += compare_dumps(ort_dump, ep_dump, steps=args.tokens)

    # The comparison must catch a wrong dump: one logit moved by 1e-2, and one token changed.
    _, recs = read_dump(ort_dump)
    mid = len(recs) // 2
    for what, edit in (("a logit moved by 1e-2", "logit"), ("a token changed", "token")):
        bad = recs.copy()
        if edit == "logit":
            bad[mid]["logits"][3] += np.float32(1e-2)
        else:
            bad[mid]["token"] = (bad[mid]["token"] + 1) % len(bad[mid]["logits"])
        bad_path = os.path.join(args.work, f"perturbed_{name}.dump")
        with open(bad_path, "wb") as f:
            with open(ort_dump, "rb") as src:
                f.write(src.read(16))
            f.write(bad.tobytes())
        if not compare_dumps(ort_dump, bad_path, steps=args.tokens):
            errs.append(f"self-check: ORT's dump with {what} at step {mid} compared equal")
    for which, rep in ep.get("session_reports", {}).items():
        took = sum(p["nodes"] for p in rep.get("partitions", []) if p["ep"] == "AotCpuExecutionProvider")
        print(f"  {which} session: AotCpu took {took} nodes, {rep.get('cpu_nodes')} on the CPU EP")
        if name == "aotcpu_static_prefill" and which == "prefill" and took == 0:
            errs.append("AotCpu took no node of the prefill session with seq pinned: the case tests nothing")
        if name == "aotcpu_dynamic_shared" and which == "decode" and any(
                q.get("load", {}).get("bytes_mapped", 1) != 0 for q in rep.get("partitions", [])):
            errs.append("the decode session mapped the binary again instead of taking its graph from the group")
        if name in ("aotcpu_dynamic_ctx", "aotcpu_dynamic_shared") and not all(
                q.get("from_ep_context") for q in rep.get("partitions", [])):
            errs.append(f"the {which} session compiled a partition instead of loading its EPContext node")
        if name in ("aotcpu_dynamic", "aotcpu_dynamic_ctx", "aotcpu_dynamic_shared") and (
                took == 0 or rep.get("cpu_nodes") != 0):
            errs.append(f"dynamic shapes: AotCpu took {took} nodes of the {which} session and "
                        f"{rep.get('cpu_nodes')} stayed on the CPU EP; it must take them all")
    if name in ("aotcpu_static_prefill", "aotcpu_dynamic", "aotcpu_dynamic_ctx", "aotcpu_dynamic_shared") and \
            "session_reports" not in ep:
        errs.append("epctx_generate --report gave no session reports")
    print(f"generate_matches_ort ({name}): {args.tokens} steps, prompt {args.prompt_len}; "
          f"tokens {ep['tokens'][:8]}...; epctx prefill {ep['prefill_ms']:.2f} ms, ORT {ort['prefill_ms']:.2f} ms")
    return errs


def case_errors(args):
    prefill, decode = ensure_decoder(args.work)
    not_onnx = os.path.join(args.work, "not_onnx.onnx")
    with open(not_onnx, "wb") as f:
        f.write(b"\x08\x07this is not an ONNX model\xff\xff\xff")
    # A model that is not a decoder: one Identity (float [2] -> float [2]).
    from onnx import TensorProto, helper, save
    ident = os.path.join(args.work, "identity.onnx")
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), ident)
    base = ["--tokens", "3"]
    cases = [
        ("missing model", ["--prefill", os.path.join(args.work, "nope.onnx"), "--decode", decode,
                           "--prompt-len", "4", *base], "no such model file"),
        ("models swapped", ["--prefill", decode, "--decode", prefill, "--prompt-len", "4", *base], "prefill model"),
        ("not a decoder", ["--prefill", ident, "--decode", decode, "--prompt-len", "4", *base], "present_"),
        ("not ONNX", ["--prefill", not_onnx, "--decode", decode, "--prompt-len", "4", *base], "INVALID_PROTOBUF"),
        ("vocab mismatch", ["--prefill", prefill, "--decode", decode, "--prompt-len", "4", "--vocab", "999", *base],
         "vocab mismatch"),
        ("prompt id outside the vocab", ["--prefill", prefill, "--decode", decode, "--prompt", "1,2,1000", *base],
         "outside the vocab"),
        ("prompt longer than the positions", ["--prefill", prefill, "--decode", decode, "--prompt-len", "200",
                                              *base], ""),
        ("bad option", ["--prefill", prefill, "--decode", decode, "--prompt-len", "x", *base], "--prompt-len"),
        ("no --tokens", ["--prefill", prefill, "--decode", decode, "--prompt-len", "4"], "--tokens"),
        ("bad EP library", ["--prefill", prefill, "--decode", decode, "--prompt-len", "4", "--ep-lib",
                            os.path.join(args.work, "nope.so"), "--ep", "AotCpuExecutionProvider", *base], ""),
    ]
    errs = []
    for what, argv, expect in cases:
        p = run([args.generate, *argv])
        err = p.stderr.strip()
        if p.returncode != 2 or not err.startswith("epctx_generate: ") or expect not in err:
            errs.append(f"{what}: exit {p.returncode} (want 2), stderr {err[:300]!r}"
                        + (f" (want it to mention {expect!r})" if expect else ""))
        else:
            print(f"  {what}: {err.splitlines()[0][:160]}")
    return errs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generate")
    ap.add_argument("--work")
    ap.add_argument("--case", choices=("cpu", "aotcpu", "aotcpu_static_prefill", "aotcpu_dynamic", "aotcpu_dynamic_ctx",
                                       "aotcpu_dynamic_shared",
                                       "errors"))
    ap.add_argument("--ep-lib")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--compare", nargs=2, metavar=("REF", "GOT"))
    args = ap.parse_args()
    if args.compare:
        errs = compare_dumps(*args.compare)
    else:
        if not (args.generate and args.work and args.case):
            ap.error("--generate, --work and --case are required (or --compare A B)")
        if args.case.startswith("aotcpu") and not args.ep_lib:
            ap.error(f"--case {args.case} needs --ep-lib")
        if shutil.which("node") is None:
            print("generate_matches_ort: node is not installed", file=sys.stderr)
            return 1
        os.makedirs(args.work, exist_ok=True)
        try:
            errs = case_errors(args) if args.case == "errors" else case_match(args, args.case)
        except RuntimeError as e:
            errs = [str(e)]
    for e in errs[:40]:
        print("FAIL:", e)
    if len(errs) > 40:
        print(f"FAIL: ... {len(errs) - 40} more")
    print("generate_matches_ort:", "FAILED" if errs else "OK")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
