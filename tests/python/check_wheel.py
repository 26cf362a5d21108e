"""CTest `python_wheel`: builds the epctx wheel from a CMake build, checks its name, tag and contents, installs it
into a fresh venv and runs ONNX Runtime-style code with the installed package from outside the repository.

    /usr/bin/python3 tests/python/check_wheel.py --build-dir build [--keep]

Not collected by pytest (its name does not match test_*.py). Needs no network: python3 -m build --no-isolation with
Debian's python3-build/setuptools/wheel, pip install --no-index --no-deps into a venv with --system-site-packages (for
numpy and onnx). The system's dist-packages may hold an epctx.pth pointing at some build tree
(scripts/install_python.sh); the venv's own site-packages comes first on sys.path, and the check asserts that epctx,
its extension and libepctx are all loaded from the venv."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        fail(f"{' '.join(map(str, cmd))} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "EPCTX_BUILD_DIR")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def build_wheel(build, outdir):
    run([sys.executable, "-m", "build", "--wheel", "--no-isolation", os.path.join(ROOT, "python"), "--outdir",
         outdir], cwd=ROOT, env=clean_env(EPCTX_BUILD_DIR=build))
    wheels = [f for f in os.listdir(outdir) if f.endswith(".whl")]
    if len(wheels) != 1:
        fail(f"expected one wheel in {outdir}, found {wheels}")
    return os.path.join(outdir, wheels[0])


def check_missing_build_message(tmp):
    """setup.py names the build folder and what to do when it is not a build."""
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", os.path.join(ROOT, "python"),
                        "--outdir", os.path.join(tmp, "nodist")], cwd=ROOT, capture_output=True, text=True,
                       env=clean_env(EPCTX_BUILD_DIR=os.path.join(tmp, "not-a-build")))
    text = r.stdout + r.stderr
    if r.returncode == 0 or "no CMake build in" not in text or "not-a-build" not in text:
        fail(f"a missing build did not fail with a clear message (exit {r.returncode}):\n{text}")


def check_wheel_file(whl, version):
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    expected = f"epctx-{version}-{py}-{py}-{plat}.whl"
    if os.path.basename(whl) != expected:
        fail(f"wheel is named {os.path.basename(whl)}, expected {expected}")
    ext_suffix = sysconfig.get_config_var("EXT_SUFFIX")
    with zipfile.ZipFile(whl) as z:
        names = set(z.namelist())
        wheel_meta = z.read(f"epctx-{version}.dist-info/WHEEL").decode()
        config = z.read("epctx/_build_config.py").decode()
    required = {"epctx/__init__.py", "epctx/__init__.pyi", "epctx/py.typed", "epctx/_session.py",
                "epctx/_compile.py", "epctx/_build_config.py", "epctx/capi/__init__.py",
                "epctx/capi/onnxruntime_pybind11_state.py", "epctx/capi/_epctx.pyi",
                f"epctx/capi/_epctx{ext_suffix}", "epctx/capi/libepctx_aotcpu.so", "epctx/capi/libepctx_example.so"}
    missing = required - names
    if missing:
        fail(f"wheel lacks {sorted(missing)}; it holds {sorted(names)}")
    libs = [n for n in names if re.fullmatch(r"epctx/capi/libepctx\.so(\.\d+)*", n)]
    if len(libs) != 1:
        fail(f"expected one libepctx shared library in epctx/capi/, found {libs}")
    if "Root-Is-Purelib: false" not in wheel_meta or f"Tag: {py}-{py}-{plat}" not in wheel_meta:
        fail(f"WHEEL metadata is not a platform wheel:\n{wheel_meta}")
    if ROOT in config or "build/" in config:
        fail(f"the wheel's _build_config.py names build-tree paths:\n{config}")
    if any("__pycache__" in n or n.endswith(".pyc") for n in names):
        fail("the wheel holds bytecode")
    return libs[0]


def check_elf(whl, tmp, libepctx):
    """The extension needs libepctx by the name the wheel stores it under and finds it through $ORIGIN only."""
    ext = f"epctx/capi/_epctx{sysconfig.get_config_var('EXT_SUFFIX')}"
    with zipfile.ZipFile(whl) as z:
        path = z.extract(ext, os.path.join(tmp, "elf"))
    dyn = run(["readelf", "-d", path]).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    paths = re.findall(r"\((?:RPATH|RUNPATH)\)\s+Library (?:rpath|runpath): \[([^\]]*)\]", dyn)
    if os.path.basename(libepctx) not in needed:
        fail(f"the extension needs {needed}, not the wheel's {os.path.basename(libepctx)}")
    if paths != ["$ORIGIN"]:
        fail(f"the extension's RPATH/RUNPATH is {paths}, expected ['$ORIGIN'] (no build-tree path)")


USER_CODE = textwrap.dedent('''
    import os, sys, sysconfig
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import epctx as ort

    venv = sys.argv[1]
    site = sysconfig.get_paths()["purelib"]
    assert os.path.realpath(site).startswith(os.path.realpath(venv)), site
    here = os.path.realpath(os.path.dirname(ort.__file__))
    assert here == os.path.realpath(os.path.join(site, "epctx")), (ort.__file__, site, sys.path)
    # The venv's site-packages precedes the system dist-packages (where an epctx.pth may point at a build tree).
    system = [i for i, p in enumerate(sys.path) if p.endswith("dist-packages")]
    assert not system or sys.path.index(site) < min(system), sys.path
    assert os.path.realpath(ort.capi._epctx.__file__).startswith(here), ort.capi._epctx.__file__
    lib = ort.get_library_path("aotcpu")
    assert os.path.realpath(lib) == os.path.join(here, "capi", "libepctx_aotcpu.so"), lib
    assert os.path.exists(ort.get_library_path("example"))
    assert "AotCpuExecutionProvider" in ort.get_available_providers()

    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((16, 32)) * 0.1).astype(np.float32)
    b1 = (rng.standard_normal(32) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((32, 8)) * 0.1).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["h1"]),
         helper.make_node("Relu", ["h1"], ["h2"]), helper.make_node("MatMul", ["h2", "W2"], ["y"])],
        "wheel_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(w2, "W2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, "mlp.onnx")
    x = rng.standard_normal((4, 16)).astype(np.float32)
    want = np.maximum(x @ w1 + b1, 0) @ w2

    sess = ort.InferenceSession("mlp.onnx", providers=["AotCpuExecutionProvider"])
    assert sess.get_providers() == ["AotCpuExecutionProvider", "CPUExecutionProvider"], sess.get_providers()
    assert set(sess.get_partition_assignments().values()) == {"AotCpuExecutionProvider"}
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-5)

    so = ort.SessionOptions()
    so.add_provider("AotCpuExecutionProvider")
    ort.ModelCompiler(so, "mlp.onnx").compile_to_file("mlp_ctx.onnx")
    ctx = onnx.load("mlp_ctx.onnx")
    assert any(n.op_type == "EPContext" for n in ctx.graph.node), [n.op_type for n in ctx.graph.node]
    sess2 = ort.InferenceSession("mlp_ctx.onnx", providers=["AotCpuExecutionProvider"])
    np.testing.assert_allclose(sess2.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-5)

    with open("want_ones_sum.txt", "w") as f:  # for the README's example (examples/compile_and_load.py), below
        f.write(f"{(np.maximum(np.ones((4, 16), np.float32) @ w1 + b1, 0) @ w2).sum(dtype=np.float64):.6g}")

    # Every libepctx* mapped into this process comes from the installed package.
    maps = {line.split()[-1] for line in open("/proc/self/maps") if "libepctx" in line}
    assert maps and all(os.path.realpath(p).startswith(here) for p in maps), maps
    print("wheel-ok", ort.__version__, ort.__file__)
''')


def check_installed(whl, tmp, version):
    venv = os.path.join(tmp, "venv")
    run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], env=clean_env())
    vpy = os.path.join(venv, "bin", "python")
    run([vpy, "-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
         whl], env=clean_env(), cwd=tmp)
    work = os.path.join(tmp, "work")
    os.makedirs(work)
    with open(os.path.join(tmp, "user_code.py"), "w") as f:
        f.write(USER_CODE)
    r = run([vpy, os.path.join(tmp, "user_code.py"), venv], env=clean_env(), cwd=work)
    if f"wheel-ok {version}" not in r.stdout:
        fail(f"unexpected output:\n{r.stdout}\n{r.stderr}")
    print(r.stdout.strip())
    # The README's Python example from the installed wheel: the first start compiles mlp_ctx.onnx (+ its AotCpu
    # binary), the second loads it without compiling; both print the sum of the output for ones.
    ex = os.path.join(work, "ex")
    os.makedirs(ex)
    shutil.copy(os.path.join(work, "mlp.onnx"), ex)
    example = os.path.join(ROOT, "examples", "compile_and_load.py")
    first = run([vpy, example, "mlp.onnx"], env=clean_env(), cwd=ex).stdout.strip()
    binary = os.path.join(ex, "mlp_ctx_aotcpu.bin")
    if not (os.path.isfile(os.path.join(ex, "mlp_ctx.onnx")) and os.path.isfile(binary)):
        fail(f"examples/compile_and_load.py wrote {sorted(os.listdir(ex))}, not mlp_ctx.onnx + mlp_ctx_aotcpu.bin")
    stamp = os.stat(binary).st_mtime_ns
    second = run([vpy, example, "mlp.onnx"], env=clean_env(), cwd=ex).stdout.strip()
    if os.stat(binary).st_mtime_ns != stamp:
        fail("examples/compile_and_load.py compiled again on its second start")
    want = open(os.path.join(work, "want_ones_sum.txt")).read()
    if first != f"mlp_ctx.onnx: y sums to {want}" or second != first:
        fail(f"examples/compile_and_load.py printed '{first}' then '{second}', expected 'mlp_ctx.onnx: y sums to {want}'")
    print("example:", first)
    # The stubs are installed beside the code.
    site = run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env=clean_env()).stdout.strip()
    for stub in ("epctx/__init__.pyi", "epctx/capi/_epctx.pyi", "epctx/py.typed"):
        if not os.path.isfile(os.path.join(site, stub)):
            fail(f"{stub} is not installed in {site}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    build = os.path.abspath(args.build_dir)
    version = re.search(r"^CMAKE_PROJECT_VERSION:STATIC=(\S+)$",
                        open(os.path.join(build, "CMakeCache.txt")).read(), re.M).group(1)
    tmp = tempfile.mkdtemp(prefix="epctx-wheel-")
    try:
        whl = build_wheel(build, os.path.join(tmp, "dist"))
        libepctx = check_wheel_file(whl, version)
        check_elf(whl, tmp, libepctx)
        check_missing_build_message(tmp)
        check_installed(whl, tmp, version)
        print(f"python_wheel: OK ({os.path.basename(whl)}, {os.path.basename(libepctx)})")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
