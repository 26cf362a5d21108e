#!/usr/bin/env bash
# Builds tests/plugin_out_of_tree/minimal_ep.c as an out-of-tree plugin and prints the library's path (the only
# line on stdout; cmake's output goes to stderr).
#   run.sh BUILD_DIR EPCTX_SOURCE_DIR
# The project is configured in a fresh folder under BUILD_DIR/plugin_out_of_tree/ whose include/ holds only a copy
# of EPCTX_SOURCE_DIR/include/epctx/ep_api.h, so the build proves the plugin needs nothing else. The library must
# export exactly CreateEpFactories and ReleaseEpFactory. Folders older than an hour are removed on the next run.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR EPCTX_SOURCE_DIR" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

parent="$build_dir/plugin_out_of_tree"
mkdir -p "$parent"
find "$parent" -mindepth 1 -maxdepth 1 -type d -mmin +60 -exec rm -rf {} + 2>/dev/null || true
work=$(mktemp -d "$parent/run.XXXXXX")
mkdir -p "$work/include/epctx"
cp "$source_dir/include/epctx/ep_api.h" "$work/include/epctx/"

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cmake -S "$here" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DEPCTX_INCLUDE_DIR="$work/include" >&2
cmake --build "$work/build" >&2

lib="$work/build/libminimal_ep.so"
exports=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sort | tr '\n' ' ')
if [ "$exports" != "CreateEpFactories ReleaseEpFactory " ]; then
  echo "run.sh: $lib exports '$exports', expected exactly CreateEpFactories and ReleaseEpFactory" >&2
  exit 1
fi
echo "$lib"
