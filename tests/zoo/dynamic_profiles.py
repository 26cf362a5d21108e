#!/usr/bin/python3
"""Shape profiles of a dynamic _ctx.onnx are built when the session loads (issue 16): ppocr_v4_det compiled once with
its dims free and `shape_profiles` naming two shapes; a session loaded from it binds both shapes while it is created,
and its first runs at those shapes bind nothing, while a third, unprofiled shape is bound at its first run; no phase
makes a constant's bytes from its packed weight (the binary stores constants read only packed once, packed). Compiled
without `shape_profiles`, the binary still holds packed weights (a representative shape bound at compile time), the
session binds nothing while loading and one shape at its first run. The
binds are read from the EP's profile lines (EPCTX_AOTCPU_PROFILE=1: one "new shape" line per bound shape, on
stderr), split by markers this script writes to stderr between the steps. Also: `epctx inspect` lists the profiles
and the ranges, and every output matches the CPU EP's within the zoo's tolerance.

    /usr/bin/python3 tests/zoo/dynamic_profiles.py --zoo build/zoo --build build
Exit 0 when all hold, 1 otherwise.
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = "ppocr_v4_det"
PROFILED = [(1, 3, 224, 320), (1, 3, 320, 448)]
OTHER = (1, 3, 256, 256)
BARE = (1, 3, 480, 640)  # the shape run from the binary compiled without profiles

CHILD = r'''
import sys, numpy as np
sys.path.insert(0, sys.argv[3])
import epctx as ort
from dynamic_shapes import load_case, fit
so = ort.SessionOptions()
so.intra_op_num_threads = 2
so.add_session_config_entry("session.disable_model_compile", "1")
so.add_provider("AotCpuExecutionProvider", {})
s = ort.InferenceSession(sys.argv[1], so)
sys.stderr.write("MARK created\n"); sys.stderr.flush()
cpu = ort.InferenceSession(sys.argv[4], ort.SessionOptions())
base = load_case(sys.argv[2])
worst = 0.0
for shape in %s:
    feeds = dict(base)
    feeds["x"] = fit(base["x"], shape)
    got = s.run(None, feeds)
    sys.stderr.write("MARK ran %%s\n" %% "x".join(map(str, shape))); sys.stderr.flush()
    want = cpu.run(None, feeds)
    for a, b in zip(got, want):
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-4):
            print("MISMATCH at", shape)
            sys.exit(1)
print("OK")
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    model = os.path.abspath(os.path.join(args.zoo, "models", MODEL + ".onnx"))
    case = os.path.abspath(os.path.join(args.zoo, "cases", MODEL, "test_data_set_0"))
    if not os.path.isfile(model):
        print(f"{model} missing (ctest -R zoo_cases makes it)")
        return 1
    tmp = tempfile.mkdtemp(prefix="epctx-profiles-")
    ctx = os.path.join(tmp, MODEL + "_ctx.onnx")
    profiles = "x:" + ",".join("x".join(map(str, s)) for s in PROFILED)
    epctx = os.path.join(build, "bin", "epctx")
    r = subprocess.run([epctx, "compile", "-e", "aotcpu", "-i",
                        f"dynamic_shapes|1 shape_profiles|{profiles} shape_ranges|p2o.DynamicDimension.1:32..2048",
                        model, "-o", ctx], capture_output=True, text=True)
    if r.returncode != 0:
        print("compile failed:", r.stderr)
        return 1
    errors = []
    insp = subprocess.run([epctx, "inspect", ctx], capture_output=True, text=True).stdout
    for s in PROFILED:
        if "x:" + "x".join(map(str, s)) not in insp:
            errors.append(f"inspect does not list the profile {s}")
    if "p2o.DynamicDimension.1 32..2048" not in insp or "shape_ranges=" not in insp:
        errors.append("inspect does not show the range (in the graph and the compatibility options)")
    env = dict(os.environ, EPCTX_AOTCPU_PROFILE="1", PYTHONDONTWRITEBYTECODE="1")
    child = CHILD % repr(PROFILED + [OTHER])
    r = subprocess.run([sys.executable, "-c", child, ctx, case, os.path.join(build, "python"), model], env=env,
                       capture_output=True, text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
    if r.returncode != 0 or "OK" not in r.stdout:
        errors.append(f"the _ctx.onnx session failed or differs from the CPU EP: {r.stdout[-500:]} {r.stderr[-1500:]}")
    # Bound shapes per phase: before "created", then after each run's marker.
    phase, binds = "load", {}
    for line in r.stderr.splitlines():
        if line.startswith("MARK "):
            phase = line[5:]
            continue
        if "[aotcpu profile] new shape" in line:
            binds[phase] = binds.get(phase, 0) + 1
    print(f"{MODEL}: shapes bound per phase: {binds}")
    derived = [l for l in r.stderr.splitlines() if "[aotcpu profile] derived constants" in l]
    if derived:
        errors.append("constants were made from their packed weights: " + "; ".join(derived))
    # Without shape_profiles: packed weights in the binary; nothing bound at load; the first run binds its shape.
    bare = os.path.join(tmp, MODEL + "_bare_ctx.onnx")
    r = subprocess.run([epctx, "compile", "-e", "aotcpu", "-i", "dynamic_shapes|1", model, "-o", bare],
                       capture_output=True, text=True)
    if r.returncode != 0:
        errors.append("compile without profiles failed: " + r.stderr[-500:])
    else:
        insp = subprocess.run([epctx, "inspect", bare], capture_output=True, text=True).stdout
        packed = [l for l in insp.splitlines() if "packed weights" in l]
        if not packed or " 0 packed weights" in packed[0]:
            errors.append(f"the binary compiled without profiles holds no packed weights: {packed}")
        for f, label in ((ctx, "with profiles"), (bare, "without")):
            size = sum(os.path.getsize(os.path.join(tmp, n)) for n in os.listdir(tmp)
                       if n.startswith(os.path.basename(f)[:-5]) and n.endswith(".bin"))
            print(f"{MODEL}: binary {label}: {size / 1e6:.1f} MB")
        child = CHILD % repr([BARE])
        r = subprocess.run([sys.executable, "-c", child, bare, case, os.path.join(build, "python"), model], env=env,
                           capture_output=True, text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
        if r.returncode != 0 or "OK" not in r.stdout:
            errors.append(f"the session without profiles failed or differs: {r.stdout[-500:]} {r.stderr[-1500:]}")
        phase, bare_binds = "load", {}
        for line in r.stderr.splitlines():
            if line.startswith("MARK "):
                phase = line[5:]
            elif "[aotcpu profile] new shape" in line:
                bare_binds[phase] = bare_binds.get(phase, 0) + 1
        print(f"{MODEL} without profiles: shapes bound per phase: {bare_binds}")
        if bare_binds != {"created": 1}:
            errors.append(f"without profiles, want nothing bound at load and one shape at the first run: {bare_binds}")
        # A shape whose lowering wants a weight in a layout or fusion the representative shape did not make makes the
        # constants from their packed weights (allowed; reported).
        for l in r.stderr.splitlines():
            if "[aotcpu profile] derived constants" in l:
                print(f"{MODEL} without profiles at {BARE}: {l.split(': ', 1)[1][:200]}")
    if binds.get("load", 0) != len(PROFILED):
        errors.append(f"{binds.get('load', 0)} shapes bound while loading, want the {len(PROFILED)} profiles")
    # Binds after a marker belong to the next run: "created" -> the first profile's, "ran <first>" -> the second's,
    # "ran <second>" -> the unprofiled shape's.
    if binds.get("created", 0) or binds.get("ran " + "x".join(map(str, PROFILED[0])), 0):
        errors.append("a profiled shape was bound at its first run")
    if binds.get("ran " + "x".join(map(str, PROFILED[1])), 0) != 1:
        errors.append("the unprofiled shape was not bound at its first run (or bound more than once)")
    for e in errors:
        print("FAIL:", e)
    print("zoo_dynamic_profiles:", "passed" if not errors else f"{len(errors)} failure(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
