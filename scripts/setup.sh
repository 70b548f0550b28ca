#!/usr/bin/env bash
# Install what dpsim needs on Debian 12 (apt-get), configure and build into build/.
# Extra arguments go to cmake's configure step (e.g. -DDPSIM_WERROR=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(build-essential cmake pkg-config libsimgrid-dev libboost-context-dev libyaml-cpp-dev catch2 libcli11-dev
          libfmt-dev nlohmann-json3-dev libbenchmark-dev gnuplot-nox clang-format libopenmpi-dev python3
          clang libclang-rt-14-dev  # clang + its runtime: libFuzzer targets (scripts/ci-fuzz.sh)
          pybind11-dev python3-dev  # the Python module (python/CMakeLists.txt)
          python3-torch python3-torchvision python3-matplotlib python3-yaml)  # import-torch and its tests
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build build -j"$(nproc)"
