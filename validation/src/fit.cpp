// Least-squares fits of the all-reduce model and the compute constants (dpsim calibrate).
#include "dpsim/validation/fit.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "dpsim/collective_algorithm.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"
#include "dpsim/input_file.hpp"
#include "dpsim/nccl_tests_log.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/units.hpp"

namespace dpsim::validation {

namespace {

// The weighted sums of the 2x2 normal equations of a line fit with w_i = 1 / t_i^2.
struct LineSums {
  double sw = 0, swx = 0, swxx = 0, swt = 0, swxt = 0;
  void add(double x, double t) {
    const double w = t > 0 ? 1.0 / (t * t) : 1.0;
    sw += w;
    swx += w * x;
    swxx += w * x * x;
    swt += w * t;
    swxt += w * x * t;
  }
  LineSums operator+(const LineSums& o) const {
    return {sw + o.sw, swx + o.swx, swxx + o.swxx, swt + o.swt, swxt + o.swxt};
  }
};

LineFit solve(const LineSums& s) {
  const double det = s.sw * s.swxx - s.swx * s.swx;
  if (!(std::fabs(det) > 0)) throw InputError("fit: the sizes do not determine a line (need two different sizes)");
  LineFit f;
  f.c = (s.sw * s.swxt - s.swx * s.swt) / det;
  f.a = (s.swt - f.c * s.swx) / s.sw;
  return f;
}

// The largest |relative error| predicting each point from the line fitted to the others. The sums without
// point i are prefix[i] + suffix[i + 1]: linear in the points, and never a difference of large sums.
double leave_one_out_error(const std::vector<double>& x, const std::vector<double>& t) {
  const size_t n = x.size();
  std::vector<LineSums> prefix(n + 1), suffix(n + 1);
  for (size_t i = 0; i < n; ++i) {
    prefix[i + 1] = prefix[i];
    prefix[i + 1].add(x[i], t[i]);
    suffix[n - 1 - i] = suffix[n - i];
    suffix[n - 1 - i].add(x[n - 1 - i], t[n - 1 - i]);
  }
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    try {
      const LineFit g = solve(prefix[i] + suffix[i + 1]);
      worst = std::max(worst, std::fabs((g.a + g.c * x[i] - t[i]) / t[i]));
    } catch (const InputError&) {
      // the remaining points share one size: no line, no leave-one-out figure for this point
    }
  }
  return worst;
}

}  // namespace

LineFit fit_line(const std::vector<double>& x, const std::vector<double>& t) {
  // minimise sum w_i (a + c x_i - t_i)^2 with w_i = 1 / t_i^2: 2x2 normal equations.
  LineSums s;
  for (size_t i = 0; i < x.size(); ++i) s.add(x[i], t[i]);
  return solve(s);
}

namespace {
double ring_x(double bytes, int n) { return ring_bytes_sent_per_gpu(bytes, n); }
}  // namespace

CollectiveFit fit_allreduce(const std::vector<AllreduceRow>& all_rows, int world_size, const FitRange& range,
                            const FitTarget& target) {
  if (world_size < 2)
    throw InputError(fmt::format(
        "fit: the all-reduce sweep has world size {}; an all-reduce fit needs at least 2 ranks", world_size));
  std::vector<AllreduceRow> rows;
  std::set<double> sizes;
  for (const auto& r : all_rows)
    if (r.bytes >= range.min_bytes && r.bytes <= range.max_bytes && r.time_s > 0) {
      rows.push_back(r);
      sizes.insert(r.bytes);
    }
  const std::string where =
      fmt::format("{} {} fit over {}..{}", range.protocol, range.algorithm, format_bytes(range.min_bytes),
                  range.max_bytes > 1e299 ? std::string("any size") : format_bytes(range.max_bytes));
  if (static_cast<int>(sizes.size()) < kMinFitSizes)
    throw InputError(fmt::format("too little data for the {}: {} distinct message size{} with a time; need at least {}",
                                 where, sizes.size(), sizes.size() == 1 ? "" : "s", kMinFitSizes));
  // The fill the model adds on top of latency + S/B for this algorithm and protocol (see FitTarget).
  const PipelineFill none{};
  const PipelineFill& fill = target.nodes > 1 || range.protocol == "ll" ? none
                             : range.algorithm == "nvls"                ? target.nvls_fill
                             : range.algorithm == "ring"                ? target.ring_fill
                                                                        : none;
  std::vector<double> x, t;
  for (const auto& r : rows) {
    x.push_back(ring_x(r.bytes, world_size));
    t.push_back(std::max(r.time_s - fill.seconds(r.bytes), 0.01 * r.time_s));
  }
  const LineFit lf = fit_line(x, t);
  if (!(lf.c > 0))
    throw InputError(
        fmt::format("the {} gives a non-positive slope (time does not grow with size): the range mixes "
                    "protocols or the data is noise; narrow it with --fit",
                    where));
  CollectiveFit f;
  f.fabric = target.fabric;
  f.algorithm = range.algorithm;
  f.protocol = range.protocol;
  f.world_size = world_size;
  f.nodes = target.nodes;
  f.latency_s = lf.a;
  f.busbw_bytes_per_s = 1.0 / lf.c;
  f.link_bytes_per_s = target.link_bytes_per_s;
  const double ceiling = fit_ceiling_bytes_per_s(f);
  f.bandwidth_efficiency = ceiling > 0 ? f.busbw_bytes_per_s / ceiling : 0.0;
  f.min_bytes = *sizes.begin();
  f.max_bytes = *sizes.rbegin();
  f.points = static_cast<int>(rows.size());
  double ss = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = (lf.a + lf.c * x[i] - t[i]) / t[i];
    ss += r * r;
    f.max_relative_residual = std::max(f.max_relative_residual, std::fabs(r));
  }
  f.rms_relative_residual = std::sqrt(ss / static_cast<double>(x.size()));
  f.loo_relative_error = leave_one_out_error(x, t);  // refit without each point, predict it
  return f;
}

Calibration read_calibration_input(const std::filesystem::path& file) {
  const std::string text = read_input_file(file);
  if (text.find("calibration_version:") != std::string::npos) {
    Calibration c = read_calibration(file);
    return c;
  }
  Calibration c = parse_nccl_tests_log(text, file.string());
  c.name = file.stem().string();
  return c;
}

StepFit fit_step(const Scenario& s, const StepResult& m) {
  const StepPlan plan = make_step_plan(s);
  const ComputeModel cm = compute_model(s);
  double fwd_flops = 0, bwd_flops = 0;
  for (const auto& op : plan.ops) {
    fwd_flops += op.forward_flops;
    bwd_flops += op.backward_flops;
  }
  const double steps = static_cast<double>(plan.gradient_accumulation);
  if (!(m.forward_s > 0) || !(m.backward_s > 0) || !(cm.peak_flops_per_s > 0))
    throw InputError(
        fmt::format("measured step of {}: forward_s and backward_s must be > 0 to fit compute", m.scenario));
  StepFit f;
  f.gemm_efficiency = fwd_flops * steps / (cm.peak_flops_per_s * m.forward_s);
  const double bwd_alone = bwd_flops * steps / (cm.peak_flops_per_s * f.gemm_efficiency);
  f.overlap_slowdown = std::max(1.0, m.backward_s / bwd_alone);
  return f;
}

FitTarget fit_target(const Topology& topology, const NcclModel& nccl) {
  const FabricSummary f = summarize_fabric(topology);
  FitTarget t;
  t.nodes = f.nodes;
  t.ring_fill = nccl.ring_fill;
  t.nvls_fill = nccl.nvls_fill;
  t.nvls = algorithm_available(Algorithm::nvls, CollectiveKind::all_reduce, f, nccl);
  t.topology = topology.name;
  // A PCIe node whose ring runs through host memory (NCCL's SHM): its efficiency is over the host-staged rate
  const bool shm = intra_shm_bound(f, nccl);
  const double intra = shm ? host_staged_rate(f, nccl) : f.intra_ring_bytes_per_s;
  if (f.nodes > 1 && f.inter_ring_bytes_per_s < intra) {
    t.fabric = f.net_class;
    t.link_bytes_per_s = f.inter_ring_bytes_per_s;
  } else {
    t.fabric = shm ? "shm" : f.intra_class;
    t.link_bytes_per_s = intra;
  }
  return t;
}

namespace {

// What to do when the busbw is above the algorithm's ceiling: which algorithm NCCL probably ran instead.
std::string above_ceiling_hint(const CollectiveFit& f, const FitTarget& t) {
  if (f.nodes > 1)
    return "On 2 or more nodes NCCL runs tree or NVLSTree at large sizes, which halve the inter-node traffic; dpsim "
           "models the ring only for this fabric (see the issue on NCCL algorithms). Calibrate a sweep run with "
           "NCCL_ALGO=Ring, or fit only the sizes where NCCL ran the ring";
  if (t.nvls && f.algorithm == "ring")
    return "On one NVSwitch node NCCL runs NVLS at large sizes: fit those with --fit simple/nvls:MIN:MAX (e.g. "
           "--fit simple/nvls:256MiB:)";
  return fmt::format(
      "Check that --topology {} is the machine the log was measured on, or fit only the sizes where "
      "NCCL ran the {}",
      t.topology.empty() ? "NAME" : t.topology, f.algorithm);
}

}  // namespace

std::optional<FitProblem> check_fit(const CollectiveFit& f, const FitTarget& t, const std::vector<AllreduceRow>& rows) {
  if (!fit_is_applied(f.algorithm, f.protocol))
    return FitProblem{fmt::format("{}/{} fits are not applied by predict; --fit accepts {}", f.protocol, f.algorithm,
                                  applied_fits_text())};
  const double ceiling = fit_ceiling_bytes_per_s(f);
  if (ceiling > 0 && f.busbw_bytes_per_s > ceiling) {
    std::string measured;  // the log's own busbw at the largest size of the fit
    for (const auto& r : rows)
      if (r.bytes == f.max_bytes && r.busbw_GBps > 0)
        measured = fmt::format(" (the log: {:.2f} GB/s at {})", r.busbw_GBps, format_bytes(r.bytes));
    return FitProblem{fmt::format(
        "the {}/{} fit's busbw {:.1f} GB/s{} is {:.1f}% of the {:.1f} GB/s the {} reaches at nominal bandwidth on "
        "{}{} (the model's ceiling): the log ran faster than the algorithm dpsim would apply it to, and an "
        "efficiency above 100% would be written. {}",
        f.protocol, f.algorithm, f.busbw_bytes_per_s / 1e9, measured, 100 * f.busbw_bytes_per_s / ceiling,
        ceiling / 1e9, f.algorithm, f.fabric,
        t.topology.empty() ? "" : fmt::format(" ({}, {} node{})", t.topology, f.nodes, f.nodes == 1 ? "" : "s"),
        above_ceiling_hint(f, t))};
  }
  if (f.rms_relative_residual > kMaxRmsRelativeResidual || f.loo_relative_error > kMaxLooRelativeError)
    return FitProblem{
        fmt::format("the {}/{} fit over {}..{} does not describe the sweep: rms relative residual {:.1f}% (limit "
                    "{:.0f}%), leave-one-out worst {:.1f}% (limit {:.0f}%). The range probably spans sizes where "
                    "NCCL ran other protocols or algorithms (LL, LL128, Simple as sizes grow): narrow it with --fit, "
                    "e.g. --fit simple:256MiB: for the large sizes, or pass --force to write it anyway",
                    f.protocol, f.algorithm, format_bytes(f.min_bytes), format_bytes(f.max_bytes),
                    100 * f.rms_relative_residual, 100 * kMaxRmsRelativeResidual, 100 * f.loo_relative_error,
                    100 * kMaxLooRelativeError),
        true};
  return std::nullopt;
}

Calibration calibrate(const std::vector<Calibration>& inputs, const std::vector<StepFit>& steps,
                      const CalibrateOptions& o, std::vector<std::string>* warnings) {
  if (inputs.empty() && steps.empty()) throw InputError("calibrate: no input files");
  Calibration out;
  out.source = "dpsim calibrate";
  out.name = o.name;
  const FitTarget target = o.target.value_or(FitTarget{});
  std::vector<FitRange> ranges = o.ranges;
  if (ranges.empty()) ranges.push_back(FitRange{});
  double gemm_flops_weight = 0, gemm_sum = 0;
  std::vector<double> slowdowns;
  for (const auto& in : inputs) {
    for (const auto& [k, v] : in.context) out.context.emplace(k, v);
    if (in.gemm_efficiency > 0) {
      gemm_sum += in.gemm_efficiency;
      gemm_flops_weight += 1;
    }
    for (const auto& g : in.gemm) out.gemm.push_back(g);
    if (in.peak_flops_per_s > 0) out.peak_flops_per_s = in.peak_flops_per_s;
    if (in.memory_efficiency > 0) out.memory_efficiency = in.memory_efficiency;
    if (in.memory_bandwidth_bytes_per_s > 0) out.memory_bandwidth_bytes_per_s = in.memory_bandwidth_bytes_per_s;
    if (in.optimizer_bytes_per_s > 0) out.optimizer_bytes_per_s = in.optimizer_bytes_per_s;
    if (in.overlap_slowdown > 0) slowdowns.push_back(in.overlap_slowdown);
    if (!in.allreduce.empty()) {
      if (!out.allreduce.empty() && out.allreduce_world_size != in.allreduce_world_size)
        throw InputError(
            fmt::format("calibrate: all-reduce sweeps of different world sizes ({} and {}); calibrate them separately",
                        out.allreduce_world_size, in.allreduce_world_size));
      out.allreduce_world_size = in.allreduce_world_size;
      out.allreduce.insert(out.allreduce.end(), in.allreduce.begin(), in.allreduce.end());
    }
  }
  for (const auto& s : steps) {
    gemm_sum += s.gemm_efficiency;
    gemm_flops_weight += 1;
    slowdowns.push_back(s.overlap_slowdown);
  }
  if (gemm_flops_weight > 0) out.gemm_efficiency = gemm_sum / gemm_flops_weight;
  if (!slowdowns.empty()) {
    double sum = 0;
    for (double x : slowdowns) sum += x;
    out.overlap_slowdown = sum / static_cast<double>(slowdowns.size());
  }
  std::sort(out.allreduce.begin(), out.allreduce.end(),
            [](const AllreduceRow& a, const AllreduceRow& b) { return a.bytes < b.bytes; });
  if (!out.allreduce.empty())
    for (const auto& r : ranges) {
      const CollectiveFit f = fit_allreduce(out.allreduce, out.allreduce_world_size, r, target);
      if (const auto problem = check_fit(f, target, out.allreduce)) {
        const std::string inputs_label = o.inputs.empty() ? std::string("calibrate") : o.inputs;
        if (!problem->forceable || !o.force)
          throw InputError(fmt::format("{}: not written: {}", inputs_label, problem->reason));
        if (warnings != nullptr)
          warnings->push_back(fmt::format("warning: {}: written with --force: {}", inputs_label, problem->reason));
      }
      out.fits.push_back(f);
    }
  if (out.fits.empty() && out.gemm_efficiency <= 0 && out.overlap_slowdown <= 0 && out.memory_efficiency <= 0)
    throw InputError("calibrate: the inputs hold nothing to fit (no all-reduce rows, GEMM, memory or step timings)");
  return out;
}

std::string describe_fit(const CollectiveFit& f) {
  const std::string eff =
      f.bandwidth_efficiency > 0
          ? fmt::format(" ({:.1f}% of the {} ceiling {} at nominal bandwidth)", 100 * f.bandwidth_efficiency,
                        f.algorithm, format_bandwidth(fit_ceiling_bytes_per_s(f)))
          : "";
  return fmt::format(
      "{} {} on {}, {} ranks, {} points {}..{}: a = {}, B = {:.2f} GB/s{}; residuals rms {:.2f}% max {:.2f}%; "
      "leave-one-out worst {:.2f}%",
      f.protocol, f.algorithm, f.fabric, f.world_size, f.points, format_bytes(f.min_bytes), format_bytes(f.max_bytes),
      format_seconds(f.latency_s), f.busbw_bytes_per_s / 1e9, eff, 100 * f.rms_relative_residual,
      100 * f.max_relative_residual, 100 * f.loo_relative_error);
}

}  // namespace dpsim::validation
