#include <catch2/catch.hpp>

#include <cmath>

#include "dpsim/error.hpp"
#include "dpsim/scenario.hpp"
#include "dpsim/validation/fit.hpp"

using namespace dpsim;
using namespace dpsim::validation;

namespace {
std::vector<AllreduceRow> synthetic(double a, double busbw, int n, int sizes, double first = 1 << 20) {
  std::vector<AllreduceRow> rows;
  for (int i = 0; i < sizes; ++i) {
    AllreduceRow r;
    r.bytes = first * std::pow(2.0, i);
    r.time_s = a + r.bytes * 2.0 * (n - 1) / n / busbw;
    rows.push_back(r);
  }
  return rows;
}
}  // namespace

TEST_CASE("the fit recovers a known latency and bus bandwidth") {
  const double a = 23.5e-6, busbw = 371.2e9;
  FitTarget target;
  target.link_bytes_per_s = 450e9;
  const CollectiveFit f = fit_allreduce(synthetic(a, busbw, 8, 12), 8, FitRange{}, target);
  CHECK(std::fabs(f.latency_s - a) / a < 1e-6);
  CHECK(std::fabs(f.busbw_bytes_per_s - busbw) / busbw < 1e-6);
  CHECK(f.bandwidth_efficiency == Approx(371.2 / 450).epsilon(1e-6));
  CHECK(f.rms_relative_residual < 1e-9);
  CHECK(f.loo_relative_error < 1e-6);
  CHECK(f.points == 12);
}

TEST_CASE("on one node the model's pipeline fill comes off the times first, so it is not counted twice") {
  const double a = 30e-6, busbw = 232e9;
  const PipelineFill fill{34.5 * (1 << 20), 165e9};
  auto rows = synthetic(a, busbw, 8, 12);
  for (auto& r : rows) r.time_s += fill.seconds(r.bytes);
  FitTarget target;
  target.ring_fill = fill;
  const CollectiveFit f = fit_allreduce(rows, 8, FitRange{}, target);
  CHECK(f.latency_s == Approx(a).epsilon(1e-6));
  CHECK(f.busbw_bytes_per_s == Approx(busbw).epsilon(1e-6));
  // without the fill the same sweep fits a larger latency and a lower bandwidth
  const CollectiveFit plain = fit_allreduce(rows, 8, FitRange{}, FitTarget{});
  CHECK(plain.busbw_bytes_per_s < busbw);
  // LL has no fill: nothing is taken off
  FitRange ll;
  ll.protocol = "ll";
  CHECK(fit_allreduce(rows, 8, ll, target).busbw_bytes_per_s == Approx(plain.busbw_bytes_per_s));
}

TEST_CASE("the fit recovers a and B for 2 ranks and a network fabric, ranges select rows") {
  const double a = 180e-6, busbw = 11.2e9;
  auto rows = synthetic(a, busbw, 2, 6, 4096);
  rows.push_back({1e9, 1.0, 0, 0, 0, 0, 0});  // an outlier outside the range
  FitRange r;
  r.max_bytes = 200000;
  FitTarget t;
  t.fabric = "net";
  const CollectiveFit f = fit_allreduce(rows, 2, r, t);
  CHECK(std::fabs(f.latency_s - a) / a < 1e-6);
  CHECK(std::fabs(f.busbw_bytes_per_s - busbw) / busbw < 1e-6);
  CHECK(f.points == 6);
  CHECK(f.bandwidth_efficiency == 0);  // no nominal link given
}

TEST_CASE("too little data is refused with a message") {
  CHECK_THROWS_WITH(fit_allreduce(synthetic(1e-5, 1e11, 8, 2), 8, FitRange{}, FitTarget{}),
                    Catch::Contains("too little data") && Catch::Contains("2 distinct message sizes") &&
                        Catch::Contains("at least 3"));
  CHECK_THROWS_WITH(fit_allreduce(synthetic(1e-5, 1e11, 1, 5), 1, FitRange{}, FitTarget{}),
                    Catch::Contains("at least 2 ranks"));
  CHECK_THROWS_AS(calibrate({}, {}, CalibrateOptions{}), InputError);
}

TEST_CASE("the nccl-tests log in tests/backend/data fits (GB10 pair, 4 sizes)") {
  const Calibration in =
      read_calibration_input(std::string(DPSIM_SOURCE_DIR) + "/tests/backend/data/all_reduce_perf_gb10_2rank.log");
  REQUIRE(in.allreduce.size() == 4);
  CHECK(in.allreduce_world_size == 2);
  CalibrateOptions o;
  o.name = "gb10";
  FitTarget t;
  t.fabric = "net";
  t.nodes = 2;
  t.link_bytes_per_s = 25e9;  // 200 Gb/s, the single QSFP link of the source
  o.target = t;
  FitRange r;
  r.protocol = "ll";
  o.ranges.push_back(r);
  const Calibration c = calibrate({in}, {}, o);
  REQUIRE(c.fits.size() == 1);
  const CollectiveFit& f = c.fits[0];
  // Rows: 8 KiB 35.15 us, 16 KiB 31.67 us, 32 KiB 39.56 us, 64 KiB 67.93 us: a noisy floor, then growth.
  CHECK(f.points == 4);
  CHECK(f.latency_s > 10e-6);
  CHECK(f.latency_s < 35e-6);
  CHECK(f.busbw_bytes_per_s > 0.8e9);
  CHECK(f.busbw_bytes_per_s < 3e9);
  CHECK(f.rms_relative_residual > 0.01);  // the 8 KiB row is slower than the 16 KiB one: not a perfect line
  CHECK(f.loo_relative_error >= f.max_relative_residual);
  CHECK(describe_fit(f).find("leave-one-out") != std::string::npos);
}
