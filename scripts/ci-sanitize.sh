#!/usr/bin/env bash
# CI: build everything with AddressSanitizer + UndefinedBehaviorSanitizer (gcc; no CUDA: nvcc code cannot be
# instrumented) into build-asan/ and run the whole test suite but the GPU tests. Any sanitizer report fails. The
# libraries and executables are instrumented; the test files are not (tests/CMakeLists.txt: they only call into them,
# and instrumenting them took most of this build's time).
# Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
# -O1 -g1: about half the compile time of -O2 -g on 2 cores; still fast enough to run the suite. Unity build: dpsim_core
# in 60 s of CPU instead of 226 s (measured on 2 cores; tests/ stays one file per object).
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" -DDPSIM_SANITIZE=ON -DDPSIM_CUDA=OFF -DDPSIM_PYTHON=OFF -DDPSIM_WERROR=ON -DCMAKE_UNITY_BUILD=ON "$@"
cmake --build build-asan -j"$(nproc)"
# halt_on_error/abort: a report is a failed test, never a warning in a log. detect_stack_use_after_return=0:
# SimGrid switches between actor stacks with its own context code, which ASan's fake stacks cannot follow.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# -LE python too: the PyTorch import tests run Python, not dpsim's C++ (the main build's ctest runs them); scale:
# the 1,048,576-GPU run is slow and large under ASan (the main build's ctest runs it). -E sim_reference_busbw: the
# published all-reduce points simulated one by one (the largest 1,440 GPUs), an accuracy check that takes 300 s under
# ASan on 2 cores; what it calls (the simulator, NCCL's release tables, the -g launch floor, the error to a range) runs
# here under sim, sim_fidelity, core and validation at smaller scale. The main build's ctest runs it (47 s), and with
# it the direct engine checked against SimGrid's on every reference scenario of up to 512 GPUs (about 20 s; the sim
# test checks the two engines on the shipped scenarios under ASan too).
ctest --test-dir build-asan --output-on-failure -j"$(nproc)" -LE 'gpu|python|scale' -E '^sim_reference_busbw$'
