#!/usr/bin/env bash
# ctest deb_package: the Debian package CPack makes from the build, checked without installing it.
#   deb_test.sh BUILD_DIR SOURCE_DIR VERSION
# `cpack -G DEB` into a temporary folder; the file is epctx_<VERSION>_<arch>.deb; its control fields (Depends from
# dpkg-shlibdeps names Debian's oneDNN, ONNX and protobuf runtime packages; maintainer, section, description); its
# contents (/usr layout with the multiarch libdir, plugins in /usr/lib/<triplet>/epctx, no Python module, no tests);
# then `dpkg-deb -x` and the extracted usr/bin/epctx compiles a model with the aotcpu it finds in
# usr/lib/<triplet>/epctx and runs the context model (`epctx test` checks the values, `run`, `perf --json`).
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR VERSION" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
version=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/epctx_deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "deb_test: FAILED: $*" >&2
  exit 1
}
. "$(dirname "${BASH_SOURCE[0]}")/cli_checks.sh"
unset LD_LIBRARY_PATH

arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
(cd "$build" && cpack -G DEB -B "$tmp/pkg") >"$tmp/cpack.log" 2>&1 || { cat "$tmp/cpack.log" >&2; fail "cpack -G DEB"; }
deb="$tmp/pkg/epctx_${version}_${arch}.deb"
[ -f "$deb" ] || { ls "$tmp/pkg" >&2; fail "no $(basename "$deb")"; }
echo "deb_test: $(basename "$deb") ($(stat -c %s "$deb") bytes)"

# Control fields.
dpkg-deb -f "$deb" >"$tmp/control"
cat "$tmp/control"
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = epctx ] || fail "Package is '$(field Package)'"
[ "$(field Version)" = "$version" ] || fail "Version is '$(field Version)'"
[ "$(field Architecture)" = "$arch" ] || fail "Architecture is '$(field Architecture)'"
[ -n "$(field Maintainer)" ] && [ -n "$(field Section)" ] || fail "Maintainer or Section missing"
[ "$(field Description | wc -l)" -gt 2 ] || fail "Description has no long text"
depends=$(field Depends)
for want in libdnnl libonnx libprotobuf libgomp; do
  echo "$depends" | grep -qE "(^|, )$want[0-9a-z.-]* " || fail "Depends lacks a $want package: $depends"
done

# Contents.
dpkg-deb -c "$deb" | awk '{print $6}' >"$tmp/contents"
for f in ./usr/bin/epctx ./usr/include/epctx/epctx.h ./usr/include/epctx/ep_api.h \
    "./usr/lib/$multiarch/libepctx.so.0.1.0" "./usr/lib/$multiarch/epctx/libepctx_aotcpu.so" \
    "./usr/lib/$multiarch/epctx/libepctx_example.so" "./usr/lib/$multiarch/cmake/epctx/epctxConfig.cmake" \
    "./usr/lib/$multiarch/pkgconfig/epctx.pc"; do
  grep -qxF "$f" "$tmp/contents" || fail "$f not in the package"
done
if grep -iE 'python|\.py$|_test|bench|fuzz|floors|share_memory' "$tmp/contents"; then
  fail "the package holds files users do not need (above)"
fi
if grep -v -E '^\./$|^\./usr/' "$tmp/contents"; then fail "files outside /usr (above)"; fi

# Extracted, nothing installed: the package's own CLI, libepctx and plugins.
root="$tmp/root"
dpkg-deb -x "$deb" "$root"
grep -qx 'prefix=/usr' "$root/usr/lib/$multiarch/pkgconfig/epctx.pc" || fail "epctx.pc's prefix is not /usr"
if grep -rF -e "$src" -e "$build" "$root/usr/lib/$multiarch/cmake" "$root/usr/lib/$multiarch/pkgconfig"; then
  fail "a path into the tree in the packaged CMake files or .pc"
fi
cli="$root/usr/bin/epctx"
used=$(ldd "$cli" | sed -n 's/.*libepctx.so.0 => \(.*\) (0x.*/\1/p')
[ -n "$used" ] && [ "$(realpath "$used")" = "$(realpath "$root/usr/lib/$multiarch/libepctx.so.0")" ] ||
  { ldd "$cli" >&2; fail "the extracted epctx does not use the extracted libepctx.so.0"; }
/usr/bin/python3 "$src/tests/install/make_model.py" "$tmp/m" || fail "make_model.py"
check_cli "$cli" "$tmp"
echo "deb_test: OK"
