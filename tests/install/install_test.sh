#!/usr/bin/env bash
# ctest install_package: `cmake --install BUILD --prefix TMP/prefix`, then everything a user does with that prefix.
#   install_test.sh BUILD_DIR SOURCE_DIR
# 1. The layout (docs/install.md): public headers only, libepctx.so -> .so.0 (SONAME) -> .so.0.1.0, the plugin EPs in
#    <libdir>/epctx/, bin/epctx with RUNPATH $ORIGIN/../<libdir>, no test/bench binaries, no Python module, and no
#    path into the source or build tree in the CMake package, the .pc file or any RPATH.
# 2. tests/install/app built with only -DCMAKE_PREFIX_PATH=<prefix> (find_package(epctx), epctx::epctx): Env lists
#    AotCpu with no path, compile to _ctx.onnx, run it, values checked; a plugin built against epctx::ep_api alone.
# 3. tests/install/pc_app.cc and the README's examples/compile_and_load.cc built with g++ and `pkg-config --cflags
#    --libs epctx`; the example compiles on its first start and loads the _ctx.onnx on its second.
# 4. The prefix moved elsewhere: its bin/epctx inspect / compile -e aotcpu / test / run / perf, with a broken library
#    in the plugin folder (a warning, not an error).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
here="$src/tests/install"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/epctx_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "install_test: FAILED: $*" >&2
  exit 1
}
. "$(dirname "${BASH_SOURCE[0]}")/cli_checks.sh"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
unset LD_LIBRARY_PATH  # everything below must find its libraries by itself

# ---- 1. install and layout
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log" >&2; fail "cmake --install"; }
lib=$(find "$prefix" -name libepctx.so.0 -printf '%h\n')
[ -n "$lib" ] || fail "no libepctx.so.0 under $prefix"
libdir=${lib#"$prefix"/}
echo "install_test: libdir $libdir"
if [ -f /etc/debian_version ] && command -v dpkg-architecture >/dev/null; then
  [ "$libdir" = "lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)" ] || fail "libdir '$libdir' is not Debian's multiarch folder"
fi
[ "$(cd "$prefix/include/epctx" && ls | tr '\n' ' ')" = "ep_api.h epctx.h status.h status_codes.h " ] ||
  fail "include/epctx holds $(ls "$prefix/include/epctx" | tr '\n' ' '), expected the 4 public headers"
[ "$(ls "$prefix/include" | tr '\n' ' ')" = "epctx " ] || fail "include/ holds more than epctx/"
[ "$(readlink "$lib/libepctx.so")" = libepctx.so.0 ] || fail "libepctx.so is not a link to libepctx.so.0"
[ "$(readlink "$lib/libepctx.so.0")" = libepctx.so.0.1.0 ] || fail "libepctx.so.0 is not a link to libepctx.so.0.1.0"
readelf -d "$lib/libepctx.so.0.1.0" | grep -q 'SONAME.*\[libepctx.so.0\]' || fail "libepctx.so.0.1.0 has no SONAME libepctx.so.0"
for p in aotcpu example; do
  [ -f "$lib/epctx/libepctx_$p.so" ] || fail "$libdir/epctx/libepctx_$p.so missing"
done
[ "$(ls "$prefix/bin" | tr '\n' ' ')" = "epctx " ] || fail "bin/ holds $(ls "$prefix/bin" | tr '\n' ' '), expected only epctx"
runpath=$(readelf -d "$prefix/bin/epctx" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
[ "$runpath" = "\$ORIGIN/../$libdir" ] || fail "bin/epctx RUNPATH is '$runpath', expected \$ORIGIN/../$libdir"
if find "$prefix" \( -name '*test*' -o -name '*bench*' -o -name '*fuzz*' -o -name '*floors*' -o -name '*python*' \
      -o -name '*.py' -o -name '_epctx*' \) | grep .; then
  fail "tests, benchmarks, fuzzers or the Python module were installed (above)"
fi
for f in $(find "$prefix" -type f \( -name '*.so*' -o -path '*/bin/*' \)); do
  if readelf -d "$f" | grep -E 'R(UN)?PATH' | grep -F -e "$src" -e "$build"; then fail "$f has an RPATH into the tree"; fi
done
[ -f "$lib/cmake/epctx/epctxConfig.cmake" ] && [ -f "$lib/cmake/epctx/epctxConfigVersion.cmake" ] &&
  [ -f "$lib/cmake/epctx/epctxTargets.cmake" ] || fail "the CMake package is incomplete"
[ -f "$lib/pkgconfig/epctx.pc" ] || fail "$libdir/pkgconfig/epctx.pc missing"
if grep -rF -e "$src" -e "$build" "$lib/cmake" "$lib/pkgconfig"; then fail "a path into the tree in the CMake package or .pc"; fi
grep -q "^prefix=$prefix\$" "$lib/pkgconfig/epctx.pc" || fail "epctx.pc does not name prefix $prefix"
# The exported runtime needs nothing but itself: no onnx, protobuf, oneDNN, fmt or OpenMP in its interface.
if grep -E 'INTERFACE_LINK_LIBRARIES|INTERFACE_INCLUDE_DIRECTORIES' "$lib/cmake/epctx/epctxTargets.cmake" |
    grep -iE 'onnx|protobuf|dnnl|fmt|openmp|/src'; then
  fail "epctx::epctx's interface names a private dependency (above)"
fi

# ---- 2. find_package consumers: the app and a plugin built against epctx::ep_api only, each from a copy outside
# the tree (the build files must then name neither tree).
/usr/bin/python3 "$here/make_model.py" "$tmp/m" || fail "make_model.py"
cp -r "$here/app" "$tmp/app-src"
mkdir "$tmp/plugin-src"
cp "$here/plugin/CMakeLists.txt" "$src/tests/plugin_out_of_tree/minimal_ep.c" "$tmp/plugin-src/"
for project in app plugin; do
  cmake -S "$tmp/$project-src" -B "$tmp/$project-build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/$project.log" 2>&1 || { cat "$tmp/$project.log" >&2; fail "configuring $project"; }
  cmake --build "$tmp/$project-build" >>"$tmp/$project.log" 2>&1 || { cat "$tmp/$project.log" >&2; fail "building $project"; }
  if grep -rlF -e "$src" -e "$build" "$tmp/$project-build" --include=build.ninja --include=Makefile \
      --include=CMakeCache.txt --include='*.make' --include=flags.make --include=link.txt; then
    fail "the $project build refers to the source or build tree (files above)"
  fi
done
exports=$(nm -D --defined-only "$tmp/plugin-build/libminimal_ep.so" | awk '{print $NF}' | sort | tr '\n' ' ')
[ "$exports" = "CreateEpFactories ReleaseEpFactory " ] || fail "libminimal_ep.so exports '$exports'"
mkdir "$tmp/out"
"$tmp/app-build/epctx_install_app" "$tmp/m/model.onnx" "$tmp/out" "$tmp/plugin-build/libminimal_ep.so" ||
  fail "epctx_install_app"

# ---- 3. pkg-config and g++ only
export PKG_CONFIG_PATH="$lib/pkgconfig"
flags=$(pkg-config --cflags --libs epctx) || fail "pkg-config --cflags --libs epctx"
echo "install_test: pkg-config: $flags"
g++ -std=c++17 "$here/pc_app.cc" $flags -Wl,-rpath,"$(pkg-config --variable=libdir epctx)" -o "$tmp/pc_app" ||
  fail "g++ with pkg-config's flags"
"$tmp/pc_app" "$tmp/m/model.onnx" || fail "pc_app"
# The README's C++ example (examples/compile_and_load.cc): the first start compiles (model_ctx.onnx + the AotCpu
# binary), the second loads the _ctx.onnx; both print the same first output value.
g++ -std=c++17 "$src/examples/compile_and_load.cc" $flags -Wl,-rpath,"$(pkg-config --variable=libdir epctx)" \
  -o "$tmp/compile_and_load" || fail "g++ examples/compile_and_load.cc with pkg-config's flags"
mkdir "$tmp/ex" && cp "$tmp/m/model.onnx" "$tmp/ex/"
first=$("$tmp/compile_and_load" "$tmp/ex/model.onnx") || fail "compile_and_load (first start: compile)"
[ -f "$tmp/ex/model_ctx.onnx" ] && [ -f "$tmp/ex/model_ctx_aotcpu.bin" ] ||
  fail "compile_and_load wrote no model_ctx.onnx + model_ctx_aotcpu.bin ($(ls "$tmp/ex" | tr '\n' ' '))"
before=$(stat -c %Y.%s "$tmp/ex/model_ctx_aotcpu.bin")
second=$("$tmp/compile_and_load" "$tmp/ex/model.onnx") || fail "compile_and_load (second start: load)"
[ "$(stat -c %Y.%s "$tmp/ex/model_ctx_aotcpu.bin")" = "$before" ] || fail "the second start compiled again"
echo "install_test: compile_and_load: $first"
# Y = Relu(ones[2,3] @ W + B): each row is 0, 0, 0.75, 2 (make_model.py's W and B).
[ "$first" = "$tmp/ex/model_ctx.onnx: Y sums to 5.5" ] || fail "compile_and_load printed '$first', expected Y sums to 5.5"
[ "$first" = "$second" ] || fail "compile_and_load: first start '$first', second '$second'"
unset PKG_CONFIG_PATH

# ---- 4. the CLI from a moved prefix (relative RUNPATH; plugins found beside the moved libepctx.so)
moved="$tmp/moved/usr"
mkdir -p "$tmp/moved"
mv "$prefix" "$moved"
cli="$moved/bin/epctx"
used=$(ldd "$cli" | sed -n 's/.*libepctx.so.0 => \(.*\) (0x.*/\1/p')
[ -n "$used" ] && [ "$(realpath "$used")" = "$(realpath "$moved/$libdir/libepctx.so.0")" ] ||
  { ldd "$cli" >&2; fail "bin/epctx does not use the libepctx.so.0 beside it"; }
"$cli" --version | grep -qx "epctx 0.1.0" || fail "epctx --version"
"$cli" inspect "$tmp/m/model.onnx" >"$tmp/inspect.txt" || fail "epctx inspect"
check_cli "$cli" "$tmp"

# A library in the plugin folder that does not load is a warning; the others still work.
echo "not an ELF file" >"$moved/$libdir/epctx/libepctx_broken.so"
"$cli" compile -e aotcpu "$tmp/m/model.onnx" -o "$tmp/out/again_ctx.onnx" >"$tmp/broken.txt" 2>&1 ||
  { cat "$tmp/broken.txt" >&2; fail "a broken plugin in the folder made compile fail"; }
grep -q "WARNING.*libepctx_broken.so" "$tmp/broken.txt" || { cat "$tmp/broken.txt" >&2; fail "no warning about libepctx_broken.so"; }
echo "install_test: OK"
