#!/usr/bin/python3
"""What a new input shape costs a dynamic AotCpu partition in the per-shape form (issue 16 target: at most 2x the
static compile's primitive creation for that shape), on the zoo's CNNs with free image sizes. Measures, never asserts.

    /usr/bin/python3 bench/dynamic_new_shape.py [--zoo build/zoo] [--build build] [--reps 3] [--out FILE.md]

Per model and shape S, medians over --reps fresh processes (2 threads):
  static build   the executor build (primitive creation) of the model compiled for S alone (-f pins), from the EP's
                 profile line "create: N steps built in X ms";
  new shape      in a dynamic_shapes=1 session that has run another shape first: the first run at S minus the second
                 run at S (bind + lowering + primitive creation + first-run effects), and the EP's own "lower + build"
                 time for S.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = {
    "ppocr_v4_det": ("x", ["p2o.DynamicDimension.0", "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"],
                     (1, 3, 320, 448), [(1, 3, 224, 320), (1, 3, 480, 640), (1, 3, 256, 256)]),
    "ppocr_v4_rec": ("x", ["p2o.DynamicDimension.0", None, None, "p2o.DynamicDimension.1"],
                     (1, 3, 48, 320), [(1, 3, 48, 160), (1, 3, 48, 640)]),
}

CHILD = r'''
import sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
import epctx as ort
from dynamic_shapes import load_case, fit
model, case, feed, first, shape = sys.argv[3], sys.argv[4], sys.argv[5], eval(sys.argv[6]), eval(sys.argv[7])
base = load_case(case)
so = ort.SessionOptions(); so.intra_op_num_threads = 2
so.add_provider("AotCpuExecutionProvider", {"dynamic_shapes": "1"})
s = ort.InferenceSession(model, so)
f = dict(base); f[feed] = fit(base[feed], first)
s.run(None, f); s.run(None, f)
f = dict(base); f[feed] = fit(base[feed], shape)
t = time.perf_counter(); s.run(None, f); a = time.perf_counter() - t
t = time.perf_counter(); s.run(None, f); b = time.perf_counter() - t
t = time.perf_counter(); s.run(None, f); c = time.perf_counter() - t
print("RESULT %.3f %.3f" % (a * 1e3, min(b, c) * 1e3))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", default=os.path.join(ROOT, "build", "zoo"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    env = dict(os.environ, EPCTX_AOTCPU_PROFILE="1", PYTHONDONTWRITEBYTECODE="1")
    lines = ["| model | shape | static build ms | new shape ms (first - steady run) | EP lower + build ms | "
             "new shape / static build |", "|---|---|---:|---:|---:|---:|"]
    for name, (feed, dims, first, shapes) in CASES.items():
        model = os.path.join(os.path.abspath(args.zoo), "models", name + ".onnx")
        case = os.path.join(os.path.abspath(args.zoo), "cases", name, "test_data_set_0")
        for shape in shapes:
            static, new, ep = [], [], []
            for _ in range(args.reps):
                pins = []
                for d, v in zip(dims, shape):
                    if d:
                        pins += ["-f", "%s:%d" % (d, v)]
                r = subprocess.run([os.path.join(build, "bin", "epctx"), "perf", model, "-e", "aotcpu", "-x", "2",
                                    "-r", "2"] + pins, env=env, capture_output=True, text=True)
                m = re.search(r"create: \d+ steps built in ([\d.]+) ms", r.stderr)
                if m:
                    static.append(float(m.group(1)))
                r = subprocess.run([sys.executable, "-c", CHILD, os.path.join(build, "python"),
                                    os.path.join(ROOT, "tests", "zoo"), model, case, feed, repr(first), repr(shape)],
                                   env=env, capture_output=True, text=True)
                m = re.search(r"RESULT ([\d.]+) ([\d.]+)", r.stdout)
                if m:
                    new.append(float(m.group(1)) - float(m.group(2)))
                binds = re.findall(r"new shape \(([^)]*)\): bind ([\d.]+) ms, lower \+ build ([\d.]+) ms", r.stderr)
                if len(binds) >= 2:
                    ep.append(float(binds[-1][1]) + float(binds[-1][2]))
            med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731
            lines.append("| %s | %s | %.1f | %.1f | %.1f | %.2f |" % (name, "x".join(map(str, shape)), med(static),
                                                                      med(new), med(ep), med(new) / med(static)))
            print(lines[-1], flush=True)
    load = os.getloadavg()
    text = ("# A new input shape in the per-shape form vs the static compile's primitive creation\n\n"
            "- command: `/usr/bin/python3 bench/dynamic_new_shape.py %s`\n- date: %s, load average %.2f %.2f %.2f\n"
            "- medians of %d fresh processes per cell, 2 threads\n\n" %
            (" ".join(sys.argv[1:]), time.strftime("%Y-%m-%dT%H:%M:%S"), load[0], load[1], load[2], args.reps)
            + "\n".join(lines) + "\n")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
