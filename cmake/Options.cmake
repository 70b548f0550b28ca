option(DPSIM_BUILD_TESTS "Build the Catch2 tests" ON)
option(DPSIM_WERROR "Treat warnings as errors" OFF)
option(DPSIM_CUDA "Build the CUDA/NCCL backend when CUDAToolkit and NCCL are found" ON)
option(DPSIM_SANITIZE "Build with AddressSanitizer + UndefinedBehaviorSanitizer" OFF)
option(DPSIM_FUZZ "Build libFuzzer targets (clang only)" OFF)

if(DPSIM_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  # GCC's -Wmaybe-uninitialized misfires under ASan (e.g. inside <regex> and <functional>): the
  # instrumentation defeats its flow analysis. ASan itself reports real uses of uninitialized memory.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
endif()

# Fuzzing: every target gets the sanitizers and libFuzzer's coverage hooks; fuzz/ links the fuzzer main.
if(DPSIM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "DPSIM_FUZZ needs clang (e.g. CXX=clang++ cmake -DDPSIM_FUZZ=ON ...)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
option(DPSIM_PYTHON "Build the Python module (import dpsim) when pybind11 is found" ON)
# Debian's python3, where python3-torch, pybind11-dev and python3-dev install (another python3 may come first in PATH).
set(DPSIM_PYTHON_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The python3 the module is built for and the tests run")
