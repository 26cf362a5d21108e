#!/usr/bin/env bash
# Makes `import epctx` work from any folder for Debian's /usr/bin/python3 (and, when it works cleanly, for the
# `python3` on PATH, e.g. a pyenv 3.11 without numpy) by writing an `epctx.pth` file that points at the build's
# python/ folder. No pip, no network, nothing copied: rebuilding updates what Python imports.
#
#   scripts/install_python.sh [BUILD_DIR]            # default: build (what scripts/build.sh builds)
#   scripts/install_python.sh BUILD_DIR --site DIR   # only write DIR/epctx.pth (for tests)
#
# Debian:  /usr/local/lib/python3.11/dist-packages/epctx.pth (the site folder for local installs; PEP 668 only
#          restricts pip, not .pth files placed by the administrator).
# PATH python3 (if another interpreter with the same extension ABI): <its site-packages>/epctx.pth, plus a folder
#          <BUILD>/python-deps holding a link to Debian's numpy when that interpreter has none. Kept only if
#          `python3 -c "import epctx, numpy"` then works; removed otherwise.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-build}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
PKG="$BUILD/python"
DEBIAN_PY=/usr/bin/python3
if [ ! -f "$PKG/epctx/__init__.py" ]; then
  echo "install_python: $PKG/epctx not built (EPCTX_PYTHON off?); nothing installed"
  exit 0
fi

write_pth() {  # write_pth DIR LINES...
  local dir="$1"; shift
  if mkdir -p "$dir" 2>/dev/null && printf '%s\n' "$@" > "$dir/epctx.pth" 2>/dev/null; then return 0; fi
  echo "install_python: cannot write $dir/epctx.pth (run as root, or use PYTHONPATH=$PKG)" >&2
  return 1
}

if [ "${2:-}" = "--site" ]; then
  write_pth "$3" "$PKG"
  exit 0
fi

site=$("$DEBIAN_PY" -c 'import site; print(site.getsitepackages()[0])')
if write_pth "$site" "$PKG" && (cd / && "$DEBIAN_PY" -c 'import epctx') ; then
  echo "install_python: $DEBIAN_PY imports epctx from $PKG ($site/epctx.pth)"
fi

# The python3 on PATH, when it is another interpreter of the same ABI (same extension suffix).
other=$(command -v python3 || true)
[ -n "$other" ] || exit 0
other_exe=$("$other" -c 'import sys; print(sys.executable)' 2>/dev/null || true)
[ -n "$other_exe" ] && [ "$(readlink -f "$other_exe")" != "$(readlink -f "$DEBIAN_PY")" ] || exit 0
suffix='import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))'
if [ "$("$other_exe" -c "$suffix")" != "$("$DEBIAN_PY" -c "$suffix")" ]; then
  echo "install_python: $other_exe has another extension ABI; use $DEBIAN_PY for epctx"
  exit 0
fi
other_site=$("$other_exe" -c 'import site; print(site.getsitepackages()[0])')
lines=("$PKG")
rm -f "$other_site/epctx.pth"  # an earlier install's numpy link must not answer the question below
if ! "$other_exe" -c 'import numpy' 2>/dev/null; then
  numpy_dir=$("$DEBIAN_PY" -c 'import numpy, os; print(os.path.dirname(numpy.__file__))')
  mkdir -p "$BUILD/python-deps"
  ln -sfn "$numpy_dir" "$BUILD/python-deps/numpy"
  lines+=("$BUILD/python-deps")
fi
if write_pth "$other_site" "${lines[@]}" &&
   (cd / && "$other_exe" -c 'import epctx, numpy; epctx.InferenceSession' 2>/dev/null); then
  echo "install_python: $other_exe imports epctx (and numpy) too ($other_site/epctx.pth)"
else
  rm -f "$other_site/epctx.pth"
  echo "install_python: $other_exe cannot import epctx cleanly; use $DEBIAN_PY"
fi
