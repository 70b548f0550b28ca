// Main of the `gpu` tests: without a usable CUDA device, print why and return ctest's skip code.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <exception>

#include "dpsim/backend/cuda.hpp"

int main(int argc, char** argv) {
  try {
    const auto info = dpsim::backend::query_machine();
    std::printf("GPU tests on %zu device(s): %s; driver %s, CUDA runtime %s, NCCL %s, cuBLAS %s\n", info.gpus.size(),
                info.gpus[0].name.c_str(), info.driver_version.c_str(), info.cuda_runtime_version.c_str(),
                info.nccl_version.c_str(), info.cublas_version.c_str());
  } catch (const std::exception& e) {
    std::printf("SKIPPED: no CUDA device (%s)\n", e.what());
    return 77;  // SKIP_RETURN_CODE in tests/backend/CMakeLists.txt
  }
  return Catch::Session().run(argc, argv);
}
