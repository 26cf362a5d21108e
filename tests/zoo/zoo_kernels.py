#!/usr/bin/python3
"""AotCpu runs no oneDNN reference kernel on the zoo models (issue 14): every step of every compiled partition, as
`EPCTX_AOTCPU_PROFILE=1 epctx perf -e aotcpu` lists it, is an optimized oneDNN implementation or the executor's own
loop, except the allowed ones below (each with the reason no optimized kernel exists in Debian's oneDNN 2.6).

    tests/zoo/zoo_kernels.py EPCTX ZOO_DIR [MANIFEST]

Also prints each model's gemm-based (im2col) convolutions, which are allowed but counted. A model AotCpu compiles
nothing of (every node on the CPU EP, e.g. the int8 and float16 ISNet models today) runs no AotCpu kernel and is
reported as such; no step profiled in any model means the profile itself broke. Exit 1 on a reference kernel that is
not allowed, naming the model, step and implementation; 2 on a usage or setup error.
"""
import json
import os
import subprocess
import sys

# (step kind, model) pairs allowed to run a reference implementation, with the reason. (Silero v4's ReduceMean over a
# middle axis was an entry until such means ran as a matrix product; ppocr_v4_det_qdq's kQConv until its weights
# layout was chosen for every thread count, issue 26.)
ALLOWED = {
}


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    epctx, zoo = sys.argv[1], sys.argv[2]
    manifest = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(__file__), "zoo.json")
    models = json.load(open(manifest))["models"]
    bad = []
    total_steps = 0
    for m in models:
        if m.get("skip"):
            print(f"{m['name']}: skipped ({m['skip']})")
            continue
        case = os.path.join(zoo, "cases", m["name"])
        if not os.path.isfile(os.path.join(case, "model.onnx")):
            print(f"zoo_kernels: {case}/model.onnx is missing (ctest -R zoo_cases makes it)", file=sys.stderr)
            return 2
        # One timed run is enough for the profile (the 1024 x 1024 ISNet models take a minute per run on the CPU EP).
        cmd = [epctx, "perf", "-e", "aotcpu", "-x", "1", "-r", "1", "--inputs", os.path.join(case, "test_data_set_0")]
        cmd += sum((["-f", p] for p in m.get("pins", [])), [])
        cmd += sum((["--input-shape", s] for s in m.get("input_shapes", [])), [])
        cmd.append(os.path.join(case, "model.onnx"))
        env = dict(os.environ, EPCTX_AOTCPU_PROFILE="1")
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            print(f"{m['name']}: epctx perf failed ({r.returncode}): {r.stderr.strip()[:400]}", file=sys.stderr)
            return 2
        steps = 0
        gemm_convs = 0
        for line in r.stderr.splitlines():
            # "[aotcpu profile] step   3 Conv   40.4 us   1.4%  jit_1x1:avx2   2t  name"
            f = line.split()
            if len(f) < 10 or f[:3] != ["[aotcpu", "profile]", "step"]:
                continue
            steps += 1
            kind, impl, name = f[4], f[8], " ".join(f[10:])
            if impl.startswith("ref"):
                reason = ALLOWED.get((kind, m["name"])) or ALLOWED.get((kind, "*"))
                if reason:
                    print(f"{m['name']}: step {f[3]} {kind} '{name}' runs {impl} (allowed: {reason})")
                else:
                    bad.append(f"{m['name']}: step {f[3]} {kind} '{name}' runs the reference kernel {impl}")
            elif kind in ("Conv", "Deconv") and "gemm" in impl:
                gemm_convs += 1
        if steps == 0:
            print(f"{m['name']}: AotCpu compiled nothing (every node on the CPU EP): no AotCpu kernel to check")
            continue
        total_steps += steps
        print(f"{m['name']}: {steps} steps, {gemm_convs} gemm-based (im2col) convolutions")
    if total_steps == 0:
        print("zoo_kernels: no AotCpu step was profiled in any model (EPCTX_AOTCPU_PROFILE broken?)", file=sys.stderr)
        return 2
    for b in bad:
        print(b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
