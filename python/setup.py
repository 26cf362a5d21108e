"""Builds the epctx wheel from an existing CMake build; nothing is compiled here.

    cmake --build build                     # or scripts/build.sh
    /usr/bin/python3 -m build --wheel --no-isolation python/ --outdir build/dist

The build folder is $EPCTX_BUILD_DIR (relative paths are taken from the repository root), default <repo>/build.
The package files come from `cmake --install <build> --component python --prefix <build_lib>` (python/CMakeLists.txt):
the Python files and stubs, the extension epctx/capi/_epctx.*.so (RPATH $ORIGIN), libepctx's shared library and the
plugin EP libraries beside it. The distribution holds a binary extension, so the wheel is tagged
cp<XY>-cp<XY>-linux_<arch> for the interpreter running this script (which must be the one the extension was built
for). setuptools' own build and egg-info folders go into the CMake build folder, not into python/.
"""
import os
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _build_dir():
    d = os.environ.get("EPCTX_BUILD_DIR") or "build"
    return os.path.normpath(d if os.path.isabs(d) else os.path.join(ROOT, d))


def _fail(message):
    sys.stderr.write(f"epctx wheel: {message}\n")
    raise SystemExit(1)


def _check_build(build):
    cache = os.path.join(build, "CMakeCache.txt")
    if not os.path.isfile(cache):
        _fail(f"no CMake build in '{build}' (no CMakeCache.txt); build first, e.g. "
              f"`EPCTX_BUILD_DIR={os.path.relpath(build, ROOT)} bash scripts/build.sh`, or set EPCTX_BUILD_DIR")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    ext = os.path.join(build, "python", "epctx", "capi", "_epctx" + suffix)
    if not os.path.isfile(ext):
        _fail(f"'{ext}' is missing: the Python extension is not built in '{build}' for this interpreter "
              f"({sys.executable}, extension suffix {suffix}); build the target epctx_python with Debian's "
              f"/usr/bin/python3 and run this with the same interpreter")
    with open(cache, encoding="utf-8") as f:
        m = re.search(r"^CMAKE_PROJECT_VERSION:STATIC=(\S+)$", f.read(), re.M)
    if not m:
        _fail(f"'{cache}' has no CMAKE_PROJECT_VERSION")
    return m.group(1)


BUILD = _build_dir()
VERSION = _check_build(BUILD)


class BinaryDistribution(Distribution):
    """The package holds a CPython extension: a platform wheel (cp311-cp311-linux_x86_64), not py3-none-any."""

    def has_ext_modules(self):
        return True


class InstallFromCMake(build_py):
    """build_py that lays the package out with CMake's python install component instead of copying sources."""

    def run(self):
        target = os.path.abspath(self.build_lib)
        shutil.rmtree(os.path.join(target, "epctx"), ignore_errors=True)
        cmd = ["cmake", "--install", BUILD, "--component", "python", "--prefix", target]
        self.announce(" ".join(cmd), level=2)
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            _fail(f"`{' '.join(cmd)}` failed ({r.returncode}):\n{r.stdout}")
        for required in ("epctx/__init__.py", "epctx/_build_config.py", "epctx/py.typed"):
            if not os.path.isfile(os.path.join(target, required)):
                _fail(f"the CMake install of '{BUILD}' has no {required}; reconfigure the build (cmake -S . -B build)")


SETUP_BUILD = os.path.join(BUILD, "python-wheel")
os.makedirs(SETUP_BUILD, exist_ok=True)

setup(
    name="epctx",
    version=VERSION,
    description="epctx: an ONNX inference runtime with ONNX Runtime's EPContext design and Python API",
    long_description=open(os.path.join(HERE, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=f"=={sys.version_info.major}.{sys.version_info.minor}.*",
    install_requires=["numpy"],
    packages=["epctx", "epctx.capi"],
    distclass=BinaryDistribution,
    cmdclass={"build_py": InstallFromCMake},
    zip_safe=False,
    options={
        "build": {"build_base": os.path.join(SETUP_BUILD, "build")},
        "egg_info": {"egg_base": SETUP_BUILD},
    },
)
