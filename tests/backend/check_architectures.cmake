# cmake -DCOMMANDS=compile_commands.json -DBINARY=dpsim -P check_architectures.cmake: kernels.cu is compiled to
# sm_90 and sm_80 machine code (the default DPSIM_CUDA_ARCHITECTURES), never only for nvcc's default, and the
# binary carries the list `measure` reports.
file(READ "${COMMANDS}" commands)
string(REGEX MATCH "\"command\": \"[^\n]*kernels\\.cu[^\n]*" kernels "${commands}")
if(NOT kernels)
  message(FATAL_ERROR "no compile command for kernels.cu in ${COMMANDS}")
endif()
foreach(arch 80 90)
  if(NOT kernels MATCHES "code=\\[sm_${arch}\\]")
    message(FATAL_ERROR "kernels.cu is not compiled to sm_${arch} machine code: ${kernels}")
  endif()
endforeach()
file(STRINGS "${BINARY}" listed REGEX "90-real")
if(NOT listed)
  message(FATAL_ERROR "${BINARY} does not carry its architecture list (90-real)")
endif()
message(STATUS "ok: kernels.cu -> sm_80 ... sm_90 machine code; the binary lists ${listed}")
