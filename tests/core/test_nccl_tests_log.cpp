// nccl-tests logs as calibration input, and the calibration YAML round trip.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "../source_dir.hpp"
#include "dpsim/calibration.hpp"
#include "dpsim/error.hpp"
#include "dpsim/nccl_tests_log.hpp"

using namespace dpsim;

namespace {
std::string src(const std::string& rel) { return std::string(DPSIM_SOURCE_DIR) + "/" + rel; }
std::string text_of(const std::string& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
}  // namespace

TEST_CASE("a real all_reduce_perf log (nccl-tests 2.20, two GB10 ranks) parses") {
  const Calibration c = parse_nccl_tests_log(text_of(src("tests/backend/data/all_reduce_perf_gb10_2rank.log")));
  CHECK(c.source == "nccl-tests all_reduce_perf");
  CHECK(c.allreduce_world_size == 2);
  CHECK(c.context.at("gpu") == "NVIDIA GB10");
  CHECK(c.context.at("nccl") == "2.31.2");
  CHECK(c.context.at("nccl_tests") == "2.20.0");
  REQUIRE(c.allreduce.size() == 4);
  CHECK(c.allreduce[0].bytes == 8192);
  CHECK(c.allreduce[0].time_s == Approx(35.15e-6));
  CHECK(c.allreduce[0].algbw_GBps == Approx(0.23));
  CHECK(c.allreduce[0].busbw_GBps == Approx(0.23));
  CHECK(c.allreduce[0].inplace_time_s == Approx(30.33e-6));
  CHECK(c.allreduce[3].bytes == 65536);
  CHECK(c.allreduce[3].inplace_busbw_GBps == Approx(1.01));
  // nccl-tests' definitions reproduce its own columns (2 decimals).
  for (const auto& r : c.allreduce)
    CHECK(allreduce_busbw_GBps(r.bytes, r.time_s, 2) == Approx(r.busbw_GBps).margin(0.006));
}

TEST_CASE("older all_reduce_perf output (no root column, 'error', mpirun tags) parses; world from busbw/algbw") {
  // Synthetic rows in the pre-2.10 layout of nccl-tests (size count type redop time algbw busbw error ...), 8 ranks.
  const std::string log =
      "[1,0]<stdout>:#       size         count    type   redop     time   algbw   busbw  error     time   algbw   "
      "busbw  error\n"
      "[1,0]<stdout>:    33554432       8388608   float     sum    400.0   83.89  146.80  0e+00    401.0   83.68  "
      "146.44  0e+00\n"
      "[1,0]<stdout>:    67108864      16777216   float     sum    700.0   95.87  167.78    N/A    701.0   95.73  "
      "167.53    N/A\n";
  const Calibration c = parse_nccl_tests_log(log);
  REQUIRE(c.allreduce.size() == 2);
  CHECK(c.allreduce_world_size == 8);
  CHECK(c.allreduce[1].time_s == Approx(700e-6));
  CHECK(c.allreduce[1].busbw_GBps == Approx(167.78));
  CHECK_THROWS_AS(parse_nccl_tests_log("# nothing here\n"), InputError);
}

TEST_CASE("calibration YAML round trip") {
  Calibration c;
  c.source = "dpsim measure --calibrate";
  c.context = {{"gpu", "NVIDIA H200"}, {"nccl", "2.28.9"}, {"host", "a \"quoted\" host"}};
  c.peak_flops_per_s = 989e12;
  c.gemm_efficiency = 0.78;
  c.gemm.push_back({8192, 4096, 4096, 1, "bf16", 3.5e-4, 7.85e14, 0.794});
  c.gemm.push_back({8192, 8192, 128, 32, "bf16", 1.1e-3, 5.0e14, 0.505});
  c.memory_bandwidth_bytes_per_s = 4.3e12;
  c.memory_efficiency = 0.9;
  c.optimizer_bytes_per_s = 3.9e12;
  c.allreduce_world_size = 8;
  c.allreduce.push_back({8, 2.1e-5, 0.0, 0.0, 2.0e-5, 0.0, 0.0});
  c.allreduce.push_back({4294967296.0, 1.6e-2, 268.4, 469.7, 1.6e-2, 268.0, 469.0});
  const std::string yaml = calibration_to_yaml(c);
  const Calibration b = parse_calibration_yaml(yaml);
  CHECK(b.version == kCalibrationFormatVersion);
  CHECK(b.source == c.source);
  CHECK(b.context == c.context);
  CHECK(b.peak_flops_per_s == Approx(989e12));
  CHECK(b.gemm_efficiency == Approx(0.78));
  REQUIRE(b.gemm.size() == 2);
  CHECK(b.gemm[1].batch == 32);
  CHECK(b.gemm[1].k == 128);
  CHECK(b.gemm[0].efficiency == Approx(0.794));
  CHECK(b.memory_bandwidth_bytes_per_s == Approx(4.3e12));
  CHECK(b.optimizer_bytes_per_s == Approx(3.9e12));
  CHECK(b.allreduce_world_size == 8);
  REQUIRE(b.allreduce.size() == 2);
  CHECK(b.allreduce[1].bytes == 4294967296.0);
  CHECK(b.allreduce[1].busbw_GBps == Approx(469.7));

  const auto file = std::filesystem::temp_directory_path() / "dpsim-calibration-test.yaml";
  write_calibration(file, c);
  CHECK(read_calibration(file).allreduce.size() == 2);
  std::filesystem::remove(file);

  CHECK_THROWS_WITH(parse_calibration_yaml("calibration_version: 1\nbogus: 3\n", "x.yaml"), Catch::Contains("bogus"));
  CHECK_THROWS_WITH(parse_calibration_yaml("calibration_version: 1\npeak_flops_per_s: fast\n", "x.yaml"),
                    Catch::Contains("fast"));
  CHECK_THROWS(parse_calibration_yaml("source: x\n"));
}

TEST_CASE("rows print like nccl-tests") {
  AllreduceRow r{1048576, 27.76e-6, 37.78, 66.11, 27.49e-6, 38.15, 66.76};
  const std::string line = nccl_tests_row(r, 4, "float");
  CHECK(line.find("1048576") != std::string::npos);
  CHECK(line.find("262144") != std::string::npos);
  CHECK(line.find("27.76") != std::string::npos);
  CHECK(line.find("66.11") != std::string::npos);
  // What we print parses back with the nccl-tests parser.
  const Calibration c = parse_nccl_tests_log(nccl_tests_header() + line);
  REQUIRE(c.allreduce.size() == 1);
  CHECK(c.allreduce[0].busbw_GBps == Approx(66.11));
}

TEST_CASE("an nccl-tests row that is not a valid measurement is refused with its line") {
  const std::string head = nccl_tests_header();
  const auto error_of = [&](const std::string& row) {
    try {
      parse_nccl_tests_log(head + row, "a.log");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string good =
      "     1048576        262144     float     sum      -1    27.76   37.78   66.11      0    27.49   38.15   66.76   "
      "   0\n";
  CHECK(error_of(good) == "(accepted)");
  CHECK(error_of("     1048576        262144     float     sum      -1    27.76   37.78   66.11      5    27.49   "
                 "38.15   66.76      0\n")
            .find("a.log:4: all_reduce_perf: 5 wrong results (#wrong)") == 0);
  CHECK(error_of("      262144       1048576     float     sum      -1    27.76   37.78   66.11      0    27.49   "
                 "38.15   66.76      0\n")
            .find("a.log:4: all_reduce_perf: size 262144 bytes is not count 1048576 x 4 bytes of float (size and count "
                  "swapped") == 0);
  CHECK(error_of("     1048576        262144     float     sum      -1    27.76   37.7\n")
            .find("a.log:4: all_reduce_perf: a row of 7 columns, not 8, 9, 12 or 13 (cut mid-line?)") == 0);
  CHECK(error_of("     1048576        262144     float     sum      -1   -27.76   37.78   66.11      0    27.49   "
                 "38.15   66.76      0\n")
            .find("a.log:4: all_reduce_perf: negative time or bandwidth -27.76") == 0);
}

// Found by scripts/ci-fuzz.sh (fuzz_nccl_log): numbers too large for their type threw std::out_of_range and ended the
// process; they are damaged lines, refused with the file and line like any other.
TEST_CASE("an nccl-tests version code or row size beyond its type is refused with its line, not thrown past") {
  const auto error_of = [](const std::string& text) {
    try {
      parse_nccl_tests_log(text, "b.log");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  CHECK(error_of("# nccl-tests version 2.20.0 (b4d5bee) nccl-headers=23102 nccl-library=23102666603\n") ==
        "b.log:1: nccl-library: \"23102666603\" is not an NCCL version code (major x 10000 + minor x 100 + patch)");
  const std::string huge(400, '9');
  CHECK(error_of(nccl_tests_header() + huge + " 262144 float sum -1 27.76 37.78 66.11 0 27.49 38.15 66.76 0\n")
            .find("b.log:4: all_reduce_perf: size " + huge + " or count 262144 is beyond any buffer") == 0);
}

TEST_CASE("a calibration with a negative latency is refused") {
  const std::string fit =
      "calibration_version: 1\nfits:\n  - fabric: nvswitch\n    protocol: simple\n    world_size: 8\n"
      "    latency_s: -1\n    busbw_bytes_per_s: 1e11\n";
  CHECK_THROWS_WITH(parse_calibration_yaml(fit, "c.yaml"), "c.yaml:6: fits[0].latency_s: must not be negative, got -1");
}
