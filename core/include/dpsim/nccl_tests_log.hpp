#pragma once
// nccl-tests' all_reduce_perf logs as calibration input, and rows printed like them: used by `dpsim calibrate`
// (validation/), `dpsim measure --calibrate` (backend/) and read_calibration_input, none of which needs the
// others' libraries.
#include <string>

#include "dpsim/calibration.hpp"

namespace dpsim {

// nccl-tests all_reduce_perf output (any version since 2.0: with or without the root column, with
// "#wrong" or "error", mpirun "[1,0]<stdout>:" prefixes). World size from its "#  Rank" lines,
// GPU name and host into context. Throws InputError when no data row is found.
Calibration parse_nccl_tests_log(const std::string& text, const std::string& file = "<log>");

// busbw of an all-reduce as nccl-tests defines it: algbw * 2(n-1)/n.
double allreduce_busbw_GBps(double bytes, double seconds, int world_size);

// One printed row like nccl-tests' (size, count, type, redop, root, time us, algbw, busbw, #wrong).
std::string nccl_tests_header();
std::string nccl_tests_row(const AllreduceRow& row, int element_bytes, const char* type_name);

}  // namespace dpsim
