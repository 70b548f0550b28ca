// `dpsim measure --calibrate`: GEMM efficiency per shape, HBM copy and optimizer bandwidth, the
// compute slowdown beside an all-reduce, and an all-reduce sweep printed like nccl-tests.
#include <algorithm>
#include <array>
#include <ctime>
#include <exception>
#include <mutex>
#include <ostream>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "device.hpp"
#include "dpsim/backend/cuda.hpp"
#include "dpsim/cost.hpp"
#include "dpsim/error.hpp"

namespace dpsim::backend {

using namespace cuda;

namespace {

struct Timer {
  cudaEvent_t a = nullptr, b = nullptr;
  Timer() {
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  template <typename F>
  double time(cudaStream_t s, F&& f) {  // seconds of f's launches on s
    check(cudaEventRecord(a, s), "cudaEventRecord");
    f();
    check(cudaEventRecord(b, s), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    return ms * 1e-3;
  }
};

// Repeats f (after 2 warm-ups) until 25 ms are spent or 100 repetitions; median seconds.
template <typename F>
double median_time(cudaStream_t s, F&& f) {
  Timer t;
  for (int i = 0; i < 2; ++i) t.time(s, f);
  std::vector<double> v;
  double spent = 0;
  while (v.size() < 5 || (spent < 0.025 && v.size() < 100)) {
    v.push_back(t.time(s, f));
    spent += v.back();
  }
  return percentile(v, 0.5);
}

std::string today() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

}  // namespace

Calibration calibrate_on_gpus(const Scenario& scenario, const StepPlan& plan, const MeasureOptions& opt,
                              std::ostream& log) {
  const MachineInfo info = query_machine();
  const int world =
      opt.gpus > 0 ? std::min<int>(opt.gpus, static_cast<int>(info.gpus.size())) : static_cast<int>(info.gpus.size());
  const Dtype dtype = scenario.training.param_dtype;
  const Elem elem = elem_of(dtype);
  const int eb = elem_bytes(elem);

  Calibration cal;
  cal.source = "dpsim measure --calibrate";
  cal.context = {{"gpu", info.gpus[0].name},
                 {"gpu_count", std::to_string(world)},
                 {"driver", info.driver_version},
                 {"cuda", info.cuda_runtime_version},
                 {"nccl", info.nccl_version},
                 {"cublas", info.cublas_version},
                 {"host", host_name()},
                 {"git", git_revision()},
                 {"date", today()},
                 {"scenario", scenario.name},
                 {"dtype", std::string(to_string(dtype)) + (scenario.training.tf32 ? " (tf32)" : "")},
                 {"peak_from", scenario.topology.gpu.key}};
  cal.peak_flops_per_s = compute_model(scenario).peak_flops_per_s;  // the peak predict uses (TF32 when set)
  if (!same_gpu_model(scenario.topology.gpu.name, info.gpus[0].name))
    log << fmt::format(
        "dpsim measure --calibrate: note: efficiencies are relative to the scenario's {} peak, this GPU is a {}\n",
        scenario.topology.gpu.key, info.gpus[0].name);

  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  // ---- GEMMs: every distinct shape of the plan (forward and both backward products) + a standard set.
  std::set<std::array<int64_t, 4>> shapes;
  for (const PlanOp& op : plan.ops)
    for (const GemmShape& g : op.gemms) {
      shapes.insert({g.m, g.n, g.k, g.batch});
      shapes.insert({g.m, g.k, g.n, g.batch});
      shapes.insert({g.k, g.n, g.m, g.batch});
    }
  for (int64_t s : {1024, 2048, 4096, 8192}) shapes.insert({s, s, s, 1});
  int64_t max_a = 1, max_b = 1, max_c = 1;
  for (const auto& s : shapes) {
    max_a = std::max(max_a, s[0] * s[2] * s[3]);
    max_b = std::max(max_b, s[2] * s[1] * s[3]);
    max_c = std::max(max_c, s[0] * s[1] * s[3]);
  }
  {
    DeviceArena arena(0);
    void* a = arena.allocate(max_a * eb, "calibration GEMM A");
    void* b = arena.allocate(max_b * eb, "calibration GEMM B");
    void* c = arena.allocate(max_c * eb, "calibration GEMM C");
    fill_random(elem, a, max_a, 11, 1.0f, stream);
    fill_random(elem, b, max_b, 12, 1.0f, stream);
    fill_random(elem, c, max_c, 13, 1.0f, stream);
    LtMatmul lt(elem, 32u << 20, arena, scenario.training.tf32);
    log << fmt::format("# GEMM ({}), {} shapes; efficiency of {:.0f} TFLOP/s\n", to_string(dtype), shapes.size(),
                       cal.peak_flops_per_s / 1e12);
    log << "#        m        n        k  batch    time(us)   TFLOP/s  efficiency\n";
    double flops_total = 0, time_total = 0;
    for (const auto& s : shapes) {
      MatmulArgs x;
      x.m = s[0];
      x.n = s[1];
      x.k = s[2];
      x.batch = s[3];
      x.a = a;
      x.b = b;
      x.c = c;
      x.stride_a = s[0] * s[2];
      x.stride_b = s[2] * s[1];
      x.stride_c = s[0] * s[1];
      const double t = median_time(stream, [&] { lt.run(x, stream); });
      GemmCalibration g;
      g.m = s[0];
      g.n = s[1];
      g.k = s[2];
      g.batch = s[3];
      g.dtype = to_string(dtype);
      g.seconds = t;
      const double flops = 2.0 * static_cast<double>(s[0]) * static_cast<double>(s[1]) * static_cast<double>(s[2]) *
                           static_cast<double>(s[3]);
      g.flops_per_s = flops / t;
      g.efficiency = cal.peak_flops_per_s > 0 ? g.flops_per_s / cal.peak_flops_per_s : 0;
      cal.gemm.push_back(g);
      log << fmt::format("{:>10} {:>8} {:>8} {:>6} {:>11.1f} {:>9.1f} {:>11.3f}\n", g.m, g.n, g.k, g.batch, t * 1e6,
                         g.flops_per_s / 1e12, g.efficiency);
      if (s[0] >= 1024 || s[3] > 1) {  // the plan's shapes, weighted by FLOPs (the standard set counts too)
        flops_total += flops;
        time_total += t;
      }
    }
    if (time_total > 0 && cal.peak_flops_per_s > 0)
      cal.gemm_efficiency = flops_total / time_total / cal.peak_flops_per_s;
  }

  // ---- HBM copy and the fused optimizer.
  {
    size_t free_b = 0, total_b = 0;
    check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    const int64_t copy_bytes = std::min<int64_t>(int64_t{2} << 30, static_cast<int64_t>(free_b / 8));
    DeviceArena arena(0);
    void* src = arena.allocate(copy_bytes, "calibration copy source");
    void* dst = arena.allocate(copy_bytes, "calibration copy destination");
    fill_random(Elem::fp32, src, copy_bytes / 4, 21, 1.0f, stream);
    const double t = median_time(stream, [&] { copy(dst, src, copy_bytes, stream); });
    cal.memory_bandwidth_bytes_per_s = 2.0 * static_cast<double>(copy_bytes) / t;
    if (scenario.topology.gpu.memory_bandwidth_bytes_per_s > 0)
      cal.memory_efficiency = cal.memory_bandwidth_bytes_per_s / scenario.topology.gpu.memory_bandwidth_bytes_per_s;
    log << fmt::format("# HBM copy: {:.2f} GB in {:.3f} ms = {:.0f} GB/s (read + write)\n",
                       static_cast<double>(copy_bytes) / 1e9, t * 1e3, cal.memory_bandwidth_bytes_per_s / 1e9);
  }
  {
    size_t free_b = 0, total_b = 0;
    check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    const int64_t n = std::min<int64_t>(int64_t{128} << 20, static_cast<int64_t>(free_b / 4 / (2 * eb + 12)));
    DeviceArena arena(0);
    void* w = arena.allocate(n * eb, "calibration weights");
    void* g = arena.allocate(n * eb, "calibration gradients");
    auto* master = static_cast<float*>(arena.allocate(n * 4, "calibration master"));
    auto* m = static_cast<float*>(arena.allocate(n * 4, "calibration m"));
    auto* v = static_cast<float*>(arena.allocate(n * 4, "calibration v"));
    fill_random(elem, w, n, 31, 0.02f, stream);
    fill_random(elem, g, n, 32, 0.01f, stream);
    convert_to_f32(elem, w, master, n, stream);
    fill_random_f32(m, n, 33, 1e-3f, stream);
    fill_random_f32(v, n, 34, 1e-6f, stream);
    int step = 0;
    const double t = median_time(stream, [&] { adamw_step(elem, w, g, master, m, v, n, ++step, AdamW{}, stream); });
    const double bytes =
        static_cast<double>(n) * (2.0 * eb + 24.0);  // grad read, weights written, master/m/v read+written
    cal.optimizer_bytes_per_s = bytes / t;
    log << fmt::format("# fused AdamW: {} parameters in {:.3f} ms = {:.0f} GB/s\n", n, t * 1e3,
                       cal.optimizer_bytes_per_s / 1e9);
  }

  // ---- all-reduce sweep (and the GEMM slowdown beside it) on `world` GPUs, one thread each.
  size_t free0 = 0, total0 = 0;
  check(cudaMemGetInfo(&free0, &total0), "cudaMemGetInfo");
  int64_t max_bytes = int64_t{4} << 30;
  while (max_bytes > 8 && 2 * max_bytes > static_cast<int64_t>(free0) * 6 / 10) max_bytes /= 2;
  std::vector<int64_t> sizes;
  for (int64_t s = 8; s <= max_bytes; s *= 2) sizes.push_back(s);
  std::vector<void*> comms = make_local_communicators(world, opt.watchdog_s);
  std::vector<std::vector<std::array<double, 2>>> times(static_cast<size_t>(world),
                                                        std::vector<std::array<double, 2>>(sizes.size()));
  std::vector<double> gemm_alone(static_cast<size_t>(world), 0), gemm_beside(static_cast<size_t>(world), 0);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  auto worker = [&](int r) {
    try {
      check(cudaSetDevice(r), "cudaSetDevice");
      auto comm = static_cast<ncclComm_t>(comms[static_cast<size_t>(r)]);
      cudaStream_t s = nullptr;
      check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
      DeviceArena arena(r);
      void* send = arena.allocate(max_bytes, "all-reduce send buffer");
      void* recv = arena.allocate(max_bytes, "all-reduce receive buffer");
      fill_random(Elem::fp32, send, max_bytes / 4, 41 + static_cast<uint64_t>(r), 1.0f, s);
      fill_random(Elem::fp32, recv, max_bytes / 4, 51 + static_cast<uint64_t>(r), 1.0f, s);
      Timer timer;
      auto launch = [&](int64_t bytes, bool inplace) {
        const ncclResult_t res =
            ncclAllReduce(inplace ? recv : send, recv, static_cast<size_t>(bytes / 4), ncclFloat, ncclSum, comm, s);
        check(res, "ncclAllReduce (calibration)");
        if (res == ncclInProgress)
          wait_comm(comm, opt.watchdog_s, fmt::format("calibration all-reduce of {} B on rank {}", bytes, r));
      };
      for (size_t i = 0; i < sizes.size(); ++i) {
        const int iters = 20;
        for (int inplace = 0; inplace < 2; ++inplace) {
          launch(sizes[i], inplace != 0);  // untimed, as nccl-tests
          const double t = timer.time(s, [&] {
            for (int k = 0; k < iters; ++k) launch(sizes[i], inplace != 0);
          });
          times[static_cast<size_t>(r)][i][static_cast<size_t>(inplace)] = t / iters;
        }
      }
      if (world > 1) {  // GEMM alone, then beside a stream of 256 MiB all-reduces
        const int64_t d = 8192;
        void* a = arena.allocate(d * d * eb, "slowdown GEMM A");
        void* b = arena.allocate(d * d * eb, "slowdown GEMM B");
        void* c = arena.allocate(d * d * eb, "slowdown GEMM C");
        fill_random(elem, a, d * d, 61, 1.0f, s);
        fill_random(elem, b, d * d, 62, 1.0f, s);
        LtMatmul lt(elem, 32u << 20, arena, scenario.training.tf32);
        cudaStream_t cs = nullptr;
        check(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking), "cudaStreamCreate");
        MatmulArgs x;
        x.m = x.n = x.k = d;
        x.a = a;
        x.b = b;
        x.c = c;
        Timer tg;
        auto gemms = [&] {
          for (int k = 0; k < 20; ++k) lt.run(x, cs);
        };
        tg.time(cs, gemms);
        gemm_alone[static_cast<size_t>(r)] = tg.time(cs, gemms);
        const int64_t ar = std::min<int64_t>(int64_t{256} << 20, max_bytes);
        for (int k = 0; k < 40; ++k) launch(ar, true);  // queued on s, runs beside the GEMMs
        gemm_beside[static_cast<size_t>(r)] = tg.time(cs, gemms);
        check(cudaStreamSynchronize(s), "all-reduce stream");
        cudaStreamDestroy(cs);
      }
      check(cudaStreamSynchronize(s), "calibration stream");
      cudaStreamDestroy(s);
    } catch (...) {
      errors[static_cast<size_t>(r)] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(worker, r);
  for (auto& t : threads) t.join();
  for (void* c : comms) destroy_communicator(c);
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);

  cal.allreduce_world_size = world;
  log << fmt::format("# all-reduce sweep: {} GPU(s), float sum, 20 iterations per size (CUDA events), GB = 1e9 B\n",
                     world);
  log << nccl_tests_header();
  double busbw_sum = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    AllreduceRow row;
    row.bytes = static_cast<double>(sizes[i]);
    double oop = 0, ip = 0;
    for (int r = 0; r < world; ++r) {  // nccl-tests -a 1: the average over ranks
      oop += times[static_cast<size_t>(r)][i][0] / world;
      ip += times[static_cast<size_t>(r)][i][1] / world;
    }
    row.time_s = oop;
    row.algbw_GBps = row.bytes / oop / 1e9;
    row.busbw_GBps = allreduce_busbw_GBps(row.bytes, oop, world);
    row.inplace_time_s = ip;
    row.inplace_algbw_GBps = row.bytes / ip / 1e9;
    row.inplace_busbw_GBps = allreduce_busbw_GBps(row.bytes, ip, world);
    busbw_sum += row.busbw_GBps;
    cal.allreduce.push_back(row);
    log << nccl_tests_row(row, 4, "float");
  }
  log << fmt::format("# Avg bus bandwidth    : {:.4f}\n", busbw_sum / static_cast<double>(sizes.size()));
  if (world > 1 && gemm_alone[0] > 0) {
    cal.overlap_slowdown = gemm_beside[0] / gemm_alone[0];
    log << fmt::format("# GEMM slowdown beside all-reduce: {:.3f}x\n", cal.overlap_slowdown);
  }
  cudaStreamDestroy(stream);
  return cal;
}

}  // namespace dpsim::backend
