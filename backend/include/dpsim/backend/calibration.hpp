#pragma once
// Calibration data: what `dpsim measure --calibrate` measures (GEMM efficiency per shape, HBM copy
// and optimizer bandwidth, an all-reduce sweep), in core's calibration format (`dpsim predict
// --calibration FILE` reads it); nccl-tests logs are parsed and printed by core (dpsim/nccl_tests_log.hpp).
#include "dpsim/calibration.hpp"
#include "dpsim/nccl_tests_log.hpp"

namespace dpsim::backend {

// One format for calibration data, read and written by core (core/include/dpsim/calibration.hpp).
using dpsim::allreduce_busbw_GBps;
using dpsim::AllreduceRow;
using dpsim::Calibration;
using dpsim::GemmCalibration;
using dpsim::nccl_tests_header;
using dpsim::nccl_tests_row;
using dpsim::parse_nccl_tests_log;
using dpsim::read_calibration;
using dpsim::write_calibration;
inline constexpr int kCalibrationVersion = kCalibrationFormatVersion;

}  // namespace dpsim::backend
