#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "../source_dir.hpp"
#include "dpsim/calibration.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/nccl_tests_log.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/validation/fit.hpp"

using namespace dpsim;

namespace {
Calibration sample() {
  Calibration c;
  c.name = "h100-box";
  c.source = "dpsim calibrate";
  c.context["gpu"] = "NVIDIA H100 80GB HBM3";
  c.peak_flops_per_s = 989e12;
  c.gemm_efficiency = 0.71;
  c.gemm.push_back({8192, 4096, 4096, 1, "bf16", 1.2e-3, 5.7e14, 0.58});
  c.memory_efficiency = 0.88;
  c.overlap_slowdown = 1.12;
  c.allreduce_world_size = 8;
  c.allreduce.push_back({1048576, 2.5e-5, 41.9, 73.4, 0, 0, 0});
  CollectiveFit f;
  f.fabric = "nvswitch";
  f.protocol = "simple";
  f.world_size = 8;
  f.latency_s = 30e-6;
  f.busbw_bytes_per_s = 360e9;
  f.link_bytes_per_s = 450e9;
  f.bandwidth_efficiency = 0.8;
  f.points = 5;
  c.fits.push_back(f);
  return c;
}
}  // namespace

TEST_CASE("calibration YAML round trip is exact and deterministic") {
  const Calibration c = sample();
  const std::string y = calibration_to_yaml(c);
  const Calibration back = parse_calibration_yaml(y, "x.yaml");
  CHECK(calibration_to_yaml(back) == y);
  CHECK(back.name == "h100-box");
  CHECK(back.gemm_efficiency == Approx(0.71));
  REQUIRE(back.fits.size() == 1);
  CHECK(back.fits[0].busbw_bytes_per_s == Approx(360e9));
  CHECK(calibration_hash(back) == calibration_hash(c));
  CHECK(calibration_hash(c).rfind("fnv1a64:", 0) == 0);
  Calibration renamed = c;
  renamed.name = "other";
  CHECK(calibration_hash(renamed) == calibration_hash(c));  // the hash is of the content, not the name
}

TEST_CASE("bad calibration files fail with file, line and key") {
  CHECK_THROWS_WITH(parse_calibration_yaml("calibration_version: 1\ngemm_eficiency: 0.5\n", "c.yaml"),
                    Catch::Contains("c.yaml:2") && Catch::Contains("did you mean \"gemm_efficiency\""));
  CHECK_THROWS_WITH(parse_calibration_yaml("calibration_version: 7\n", "c.yaml"), Catch::Contains("must be 1"));
  CHECK_THROWS_AS(parse_calibration_yaml("calibration_version: 1\noverlap_slowdown: fast\n", "c.yaml"), InputError);
}

TEST_CASE("apply_calibration overrides the fitted constants and records name and hash") {
  Scenario s = load_scenario(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios/llama3.1-8b-8xh100.yaml");
  const std::string version = s.nccl.version;
  const Calibration c = sample();
  apply_calibration(s, c);
  CHECK(s.topology.gpu.gemm_efficiency == Approx(0.71));
  CHECK(s.topology.gpu.memory_efficiency == Approx(0.88));
  CHECK(s.nccl.overlap_slowdown == Approx(1.12));
  CHECK(s.nccl.ring_efficiency.at("nvswitch") == Approx(0.8));
  // 30 us = base 8.4 us + 14 hops x hw: hw = 21.6 / 14 us
  CHECK(s.nccl.hw_latency_s.at(Fabric::nvlink).at(Algorithm::ring).simple == Approx(21.6e-6 / 14));
  CHECK(s.nccl.version == version + " + calibration h100-box " + calibration_hash(c));
  const auto ctx = calibration_context(c);
  CHECK(ctx["name"] == "h100-box");
  CHECK(ctx["hash"] == calibration_hash(c));
}

TEST_CASE("per-shape GEMM efficiencies of a calibration time the plan's GEMMs of those shapes") {
  Scenario s = load_scenario(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios/llama3.1-8b-8xh100.yaml");
  const StepPlan plan = make_step_plan(s);
  const PlanOp* op = nullptr;
  for (const auto& o : plan.ops)
    if (o.kind == OpKind::matmul && o.gemms.size() == 1 && o.forward_bytes == 0) op = &o;
  REQUIRE(op != nullptr);
  const GemmShape g = op->gemms[0];
  const double flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  const double dw_model_s = gemm_seconds({g.k, g.n, g.m, g.batch}, compute_model(s));  // not calibrated below
  Calibration c;
  c.name = "shapes";
  // the forward shape measured at half the GPU's efficiency, dX and dW at the GPU's, another dtype ignored
  const double eff = s.topology.gpu.gemm_efficiency;
  c.gemm.push_back({g.m, g.n, g.k, g.batch, "bf16", 1e-3, 1e15, eff / 2});
  c.gemm.push_back({g.m, g.k, g.n, g.batch, "bf16", 1e-3, 1e15, eff});
  c.gemm.push_back({g.k, g.n, g.m, g.batch, "fp32", 1e-3, 1e15, eff / 4});
  apply_calibration(s, c);
  CHECK(s.topology.gpu.gemm_efficiency_by_shape.size() == 2);
  const ComputeModel cm = compute_model(s);
  CHECK(forward_seconds(*op, cm) == Approx(flops / (cm.peak_flops_per_s * eff / 2)));
  CHECK(backward_seconds(*op, cm) ==
        Approx(flops / (cm.peak_flops_per_s * eff) + dw_model_s + memory_seconds(op->grad_copy_bytes, cm)));
}

TEST_CASE("a PCIe fit leaves an NVSwitch scenario's ring efficiency alone") {
  Scenario s = load_scenario(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios/llama3.1-8b-8xh100.yaml");
  const double before = s.nccl.ring_efficiency.at("nvswitch");
  Calibration c;
  c.name = "pcie";
  CollectiveFit f;
  f.fabric = "pcie";
  f.world_size = 4;
  f.latency_s = 40e-6;
  f.busbw_bytes_per_s = 20e9;
  f.bandwidth_efficiency = 0.6;
  c.fits.push_back(f);
  apply_calibration(s, c);
  CHECK(s.nccl.ring_efficiency.at("nvswitch") == before);
}

TEST_CASE("read_yaml_as_json keeps quoted numbers as strings") {
  const auto j =
      read_yaml_as_json(std::filesystem::path(DPSIM_SOURCE_DIR) / "validation/reference/allreduce-pcie.yaml");
  REQUIRE(j.is_array());
  CHECK(j[0]["id"] == "ar-rtx4090-4gpu-pcie-p2p-patched");
  CHECK(j[0]["measured"][0]["busbw_GBps"].get<double>() == Approx(25.72));
  CHECK(j[0]["hardware"]["count"].get<int>() == 4);
}

TEST_CASE("a calibrated multi-node ring latency is reproduced on EFA (the plugin latency is not counted twice)") {
  Topology t = load_topology(std::filesystem::path(DPSIM_SOURCE_DIR) / "topologies/aws-p5-efa.yaml");
  t.nodes = 4;
  Scenario s;
  s.topology = t;
  s.nccl = load_nccl(std::filesystem::path(DPSIM_SOURCE_DIR) / "data/nccl.yaml");
  Calibration c;
  CollectiveFit f;
  f.fabric = "efa";
  f.protocol = "simple";
  f.world_size = 32;
  f.nodes = 4;
  f.latency_s = 700e-6;  // 32 ranks: 56 NVLink hops and 6 EFA hops
  f.busbw_bytes_per_s = 300e9;
  f.bandwidth_efficiency = 0.75;
  f.points = 6;
  c.fits.push_back(f);
  apply_calibration(s, c);
  CHECK(s.nccl.ring_efficiency.at("efa") == Approx(0.75));
  const auto cost = allreduce_cost(64, summarize_fabric(s.topology), s.nccl, {Algorithm::ring, Protocol::simple});
  CHECK(cost.latency_s == Approx(700e-6));
}

namespace {
std::filesystem::path source(const std::string& path) { return std::filesystem::path(DPSIM_SOURCE_DIR) / path; }
// The DGX H100 log calibrated as `dpsim calibrate LOG --topology h100-8x-nvswitch --fit simple/nvls:256MiB:` does.
Calibration h100_nvls_calibration() {
  const Calibration in =
      validation::read_calibration_input(source("tests/validation/data/all_reduce_perf_h100_dgx_8gpu.log"));
  validation::CalibrateOptions o;
  o.name = "h100-dgx";
  o.target = validation::fit_target(load_topology(source("topologies/h100-8x-nvswitch.yaml")),
                                    load_nccl(source("data/nccl.yaml")));
  validation::FitRange r;
  r.algorithm = "nvls";
  r.min_bytes = 256.0 * (1 << 20);
  o.ranges.push_back(r);
  return validation::calibrate({in}, {}, o);
}
}  // namespace

TEST_CASE("a calibration from the DGX H100 log reproduces the log's busbw within 5% at 256 MiB and up") {
  const Calibration c = h100_nvls_calibration();
  Scenario s;  // as inspect topology applies it
  s.topology = load_topology(source("topologies/h100-8x-nvswitch.yaml"));
  s.nccl = load_nccl(source("data/nccl.yaml"));
  const CalibrationReport report = apply_calibration(s, c);
  CHECK(report.not_applied.empty());
  REQUIRE(report.applied.size() == 1);
  CHECK(report.applied[0] == "simple/nvls on nvswitch (8 ranks)");
  const Calibration log =
      validation::read_calibration_input(source("tests/validation/data/all_reduce_perf_h100_dgx_8gpu.log"));
  int checked = 0;
  for (const auto& row : log.allreduce) {
    if (row.bytes < 256.0 * (1 << 20)) continue;
    const auto cost = allreduce_cost(row.bytes, summarize_fabric(s.topology), s.nccl, {});
    CHECK(cost.algorithm == Algorithm::nvls);
    CHECK(cost.busbw_bytes_per_s / 1e9 == Approx(row.busbw_GBps).epsilon(0.05));
    ++checked;
  }
  CHECK(checked == 7);  // 256 MiB .. 16 GiB
}

TEST_CASE("apply_calibration says which entries it applied and why it left the others") {
  Calibration c = h100_nvls_calibration();
  c.gemm.push_back({4096, 4096, 4096, 1, "fp32", 1e-3, 1e14, 0.5});
  CollectiveFit tree = c.fits[0];  // a kind predict does not apply (an old file may hold one)
  tree.algorithm = "tree";
  c.fits.push_back(tree);
  // on 4 RTX 4090s over PCIe: the NVSwitch fit has no place, the fp32 shape not the scenario's dtype
  Scenario pcie = load_scenario(source("scenarios/gpt2-124m-4xrtx4090.yaml"));
  const CalibrationReport r = apply_calibration(pcie, c);
  CHECK(r.applied.empty());
  REQUIRE(r.not_applied.size() == 3);
  CHECK(r.not_applied[0].entry == "1 GEMM shape (fp32)");
  CHECK_THAT(r.not_applied[1].reason, Catch::Contains("fitted on nvswitch") && Catch::Contains("pcie in a node"));
  CHECK_THAT(r.not_applied[2].reason, Catch::Contains("simple/tree fit has nothing to set"));
  CHECK_THAT(r.summary(),
             Catch::StartsWith("calibration h100-dgx: applied nothing; not applied: 1 GEMM shape (fp32) ("));
  const auto j = r.to_json(c);
  CHECK(j["name"] == "h100-dgx");
  CHECK(j["not_applied"].size() == 3);
  // a busbw above the ring's ceiling (a file written before calibrate refused them) is not applied either
  Calibration above;
  above.name = "above";
  CollectiveFit f;
  f.world_size = 8;
  f.busbw_bytes_per_s = 466e9;
  f.link_bytes_per_s = 400e9;
  f.bandwidth_efficiency = 1.166;
  above.fits.push_back(f);
  Scenario h100 = load_scenario(source("scenarios/llama3.1-8b-8xh100.yaml"));
  const double before = h100.nccl.ring_efficiency_for("nvswitch", h100.topology.gpu.arch);
  const CalibrationReport a = apply_calibration(h100, above);
  REQUIRE(a.not_applied.size() == 1);
  CHECK_THAT(a.not_applied[0].reason, Catch::Contains("above the ring ceiling 400.0 GB/s"));
  CHECK(h100.nccl.ring_efficiency_for("nvswitch", h100.topology.gpu.arch) == before);
}

TEST_CASE("read_yaml_as_json (validate --reference) refuses a billion-laughs file and duplicate keys") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "dpsim-laughs";
  std::filesystem::create_directories(dir);
  const auto laughs = dir / "laughs.yaml";
  {
    std::ofstream out(laughs);
    out << "- &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
    for (char c = 'b'; c <= 'q'; ++c) {
      out << "- &" << c << " [";
      for (int i = 0; i < 10; ++i) out << (i ? ", " : "") << "*" << static_cast<char>(c - 1);
      out << "]\n";
    }
  }
  CHECK_THROWS_WITH(read_yaml_as_json(laughs),
                    Catch::Contains("expands to more than 1000000 values (YAML aliases repeated inside each other?)"));
  const auto dup = dir / "dup.yaml";
  std::ofstream(dup) << "- id: a\n  kind: allreduce\n  id: b\n";
  CHECK_THROWS_WITH(read_yaml_as_json(dup), dup.string() +
                                                ":3: [0].id: duplicate key \"id\" (first at line 1); YAML "
                                                "would keep only one of them");
  std::filesystem::remove_all(dir);
}

TEST_CASE("calibration values outside their range are refused with file, line and key") {
  CHECK_THROWS_WITH(parse_calibration_yaml("calibration_version: 1\ngemm_efficiency: 7\n", "c.yaml"),
                    "c.yaml:2: gemm_efficiency: must be a fraction of the peak from 0 to 1 (0 = not measured), got 7");
  CHECK_THROWS_WITH(parse_calibration_yaml("calibration_version: 1\nmemory_efficiency: -0.5\n", "c.yaml"),
                    "c.yaml:2: memory_efficiency: must be a fraction of the peak from 0 to 1 (0 = not measured), got "
                    "-0.5");
  CHECK_THROWS_WITH(parse_calibration_yaml("calibration_version: 1\noverlap_slowdown: 0.5\n", "c.yaml"),
                    "c.yaml:2: overlap_slowdown: must be a slowdown factor >= 1 (0 = not measured), got 0.5");
  CHECK_THROWS_WITH(
      parse_calibration_yaml("calibration_version: 1\nfits:\n  - {fabric: nvswitch, protocol: simple, world_size: 8, "
                             "latency_s: 1e-5, busbw_bytes_per_s: 1e11,\n     bandwidth_efficiency: 5}\n",
                             "c.yaml"),
      "c.yaml:4: fits[0].bandwidth_efficiency: must be a fraction of the peak from 0 to 1 (0 = not measured), got 5");
}

TEST_CASE("a calibration measured on another GPU applies nothing and says so for each entry") {
  Scenario s = load_scenario(std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios/bert-large-8xa100.yaml");
  const double gemm = s.topology.gpu.gemm_efficiency;
  const double ring = s.nccl.ring_efficiency.at("nvswitch");
  Calibration c = sample();  // measured on the scenario's fabric (nvswitch), but on an H100
  c.context["gpu"] = "NVIDIA H100 80GB HBM3";
  const CalibrationReport r = apply_calibration(s, c);
  CHECK(r.applied.empty());
  REQUIRE(!r.not_applied.empty());
  CHECK(r.not_applied[0].entry == "gemm_efficiency 0.710");
  CHECK(r.not_applied[0].reason == "measured on NVIDIA H100 80GB HBM3; this scenario runs NVIDIA A100-SXM4-80GB");
  CHECK(s.topology.gpu.gemm_efficiency == gemm);
  CHECK(s.nccl.ring_efficiency.at("nvswitch") == ring);
  c.context["gpu"] = s.topology.gpu.name;  // the same GPU: applied
  CHECK(!apply_calibration(s, c).applied.empty());
}
