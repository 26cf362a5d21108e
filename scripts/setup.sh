#!/usr/bin/env bash
# Installs everything epctx needs on a fresh Debian 12 machine (idempotent; skips apt when all is present).
set -euo pipefail
PKGS=(build-essential cmake ninja-build ccache pkg-config
      libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
      libdnnl-dev libgtest-dev libgmock-dev
      libfmt-dev libcli11-dev nlohmann-json3-dev libxxhash-dev libzstd-dev
      pybind11-dev python3-dev python3-numpy python3-onnx python3-pytest python3-protobuf
      clang libclang-rt-14-dev
      python3-build python3-wheel python3-setuptools python3-venv python3-pip dpkg-dev file)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js + npm (for the onnxruntime-node reference); some images ship nodesource's nodejs, which bundles npm.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
