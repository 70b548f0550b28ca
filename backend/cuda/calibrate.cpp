// `dpsim measure --calibrate`: GEMM efficiency per shape, HBM copy and optimizer bandwidth, the
// compute slowdown beside an all-reduce, and an all-reduce sweep printed like nccl-tests.
#include <algorithm>
#include <array>
#include <ctime>
#include <exception>
#include <map>
#include <mutex>
#include <ostream>
#include <thread>
#include <tuple>

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

// Times NCCL work on a stream: the end event is handed to the watchdog thread, which aborts the communicator
// when it is late, instead of a cudaEventSynchronize that would wait for a hung collective forever.
struct WatchedTimer {
  Watchdog& watchdog;
  Timer t;
  explicit WatchedTimer(Watchdog& w) : watchdog(w) {}
  template <typename F>
  double time(cudaStream_t s, const std::string& what, F&& f) {
    check(cudaEventRecord(t.a, s), "cudaEventRecord");
    f();
    check(cudaEventRecord(t.b, s), "cudaEventRecord");
    watchdog.watch(t.b, what);
    watchdog.wait_all();
    float ms = 0;
    check(cudaEventElapsedTime(&ms, t.a, t.b), "cudaEventElapsedTime");
    return ms * 1e-3;
  }
};

// Each distinct GEMM call of one step (role, shape, transposes as the walker issues them) and how many times
// the step runs it: the walker's launches through the dry run.
struct StepGemm {
  GemmCall call;
  int64_t per_step = 0;
};
std::vector<StepGemm> step_gemms(const StepPlan& plan) {
  const StepLayout layout = make_layout(plan, 2, true);
  DryRunExecutor dry;
  WalkOptions wo;
  wo.gradient_accumulation = plan.gradient_accumulation;
  walk_step(plan, layout, wo, dry);
  std::map<std::tuple<int, int64_t, int64_t, int64_t, int64_t, bool>, StepGemm> seen;
  std::vector<std::tuple<int, int64_t, int64_t, int64_t, int64_t, bool>> order;
  for (const Launch& l : dry.launches()) {
    if (l.type != Launch::Type::gemm && l.type != Launch::Type::batched_gemm) continue;
    GemmCall c = l.gemm_call;
    c.grad = -1;  // timed into scratch
    const auto key = std::make_tuple(static_cast<int>(c.role), c.m, c.n, c.k, c.batch, c.accumulate);
    auto [it, added] = seen.emplace(key, StepGemm{c, 0});
    if (added) order.push_back(key);
    ++it->second.per_step;
  }
  std::vector<StepGemm> out;
  for (const auto& k : order) out.push_back(seen.at(k));
  return out;
}

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

  // ---- GEMMs: the step's own, as the walker issues them and the executor runs them (layouts, transposes),
  // each distinct call timed once and weighted by how often one step runs it; plus a standard square set.
  const std::vector<StepGemm> step_calls = step_gemms(plan);
  std::vector<StepGemm> timed = step_calls;
  for (int64_t d : {1024, 2048, 4096, 8192})
    timed.push_back({GemmCall{.role = GemmRole::forward, .m = d, .n = d, .k = d}, 0});
  int64_t max_elems = 1;
  for (const StepGemm& g : timed)
    max_elems = std::max({max_elems, g.call.m * g.call.k * g.call.batch, g.call.k * g.call.n * g.call.batch,
                          g.call.m * g.call.n * g.call.batch});
  {
    DeviceArena arena(0);
    GemmOperands o;
    void* x = arena.allocate(max_elems * eb, "calibration GEMM X");
    void* w = arena.allocate(max_elems * eb, "calibration GEMM W");
    void* dy = arena.allocate(max_elems * eb, "calibration GEMM dY");
    void* out = arena.allocate(max_elems * eb, "calibration GEMM output");
    fill_random(elem, x, max_elems, 11, 1.0f, stream);
    fill_random(elem, w, max_elems, 12, 1.0f, stream);
    fill_random(elem, dy, max_elems, 13, 1.0f, stream);
    fill_random(elem, out, max_elems, 14, 1.0f, stream);
    o = {x, w, dy, out};
    LtMatmul lt(elem, 32u << 20, arena, scenario.training.tf32);
    log << fmt::format("# GEMM ({}), {} distinct calls of the step + {} standard; efficiency of {:.0f} TFLOP/s\n",
                       to_string(dtype), step_calls.size(), timed.size() - step_calls.size(),
                       cal.peak_flops_per_s / 1e12);
    log << "# role       layout        m        n        k  batch  per step    time(us)   TFLOP/s  efficiency\n";
    double flops_total = 0, time_total = 0;
    for (const StepGemm& sg : timed) {
      const GemmCall& c = sg.call;
      const MatmulArgs args = step_matmul(c, o);
      const double t = median_time(stream, [&] { lt.run(args, stream); });
      GemmCalibration g;
      g.m = c.m;
      g.n = c.n;
      g.k = c.k;
      g.batch = c.batch;
      g.dtype = to_string(dtype);
      g.seconds = t;
      g.flops_per_s = c.flops() / t;
      g.efficiency = cal.peak_flops_per_s > 0 ? g.flops_per_s / cal.peak_flops_per_s : 0;
      cal.gemm.push_back(g);
      log << fmt::format("{:<10} {:<8} {:>8} {:>8} {:>8} {:>6} {:>9} {:>11.1f} {:>9.1f} {:>11.3f}\n", to_string(c.role),
                         fmt::format("{}{}", args.trans_a ? 'T' : 'N', args.trans_b ? 'T' : 'N'), g.m, g.n, g.k,
                         g.batch, sg.per_step, t * 1e6, g.flops_per_s / 1e12, g.efficiency);
      flops_total += c.flops() * static_cast<double>(sg.per_step);
      time_total += t * static_cast<double>(sg.per_step);
    }
    if (time_total > 0 && cal.peak_flops_per_s > 0)
      cal.gemm_efficiency = flops_total / time_total / cal.peak_flops_per_s;
    log << fmt::format("# the step's GEMMs as it runs them: {:.3f} of peak\n", cal.gemm_efficiency);
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
  std::vector<int> devices;
  for (int r = 0; r < world; ++r) devices.push_back(r);
  // World communicators (non-blocking, owned here; nullptr once aborted), each split into a blocking one for
  // the sweep, watched by its rank's watchdog thread.
  std::vector<ncclComm_t> comms = world > 1 ? init_local_comms(devices, opt.watchdog_s) : std::vector<ncclComm_t>();
  std::vector<std::vector<std::array<double, 2>>> times(static_cast<size_t>(world),
                                                        std::vector<std::array<double, 2>>(sizes.size()));
  std::vector<double> gemm_alone(static_cast<size_t>(world), 0), gemm_beside(static_cast<size_t>(world), 0);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::atomic<bool> failed{false};
  auto worker = [&](int r) {
    ncclComm_t comm = nullptr;
    try {
      check(cudaSetDevice(r), "cudaSetDevice");
      if (world == 1) return;  // one GPU: no all-reduce moves data (NCCL's one-rank sum is a no-op)
      comm = split_blocking(comms[static_cast<size_t>(r)], 0, r, opt.watchdog_s,
                            fmt::format("calibration communicator of rank {}", r));
      Watchdog watchdog(r, {&comm}, opt.watchdog_s, &failed);
      cudaStream_t s = nullptr;
      check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
      DeviceArena arena(r);
      void* send = arena.allocate(max_bytes, "all-reduce send buffer");
      void* recv = arena.allocate(max_bytes, "all-reduce receive buffer");
      fill_random(Elem::fp32, send, max_bytes / 4, 41 + static_cast<uint64_t>(r), 1.0f, s);
      fill_random(Elem::fp32, recv, max_bytes / 4, 51 + static_cast<uint64_t>(r), 1.0f, s);
      WatchedTimer timer(watchdog);
      auto launch = [&](int64_t bytes, bool inplace) {
        check(ncclAllReduce(inplace ? recv : send, recv, static_cast<size_t>(bytes / 4), ncclFloat, ncclSum, comm, s),
              fmt::format("calibration all-reduce of {} B on rank {}", bytes, r).c_str());
      };
      for (size_t i = 0; i < sizes.size(); ++i) {
        const int iters = 20;
        for (int inplace = 0; inplace < 2; ++inplace) {
          launch(sizes[i], inplace != 0);  // untimed, as nccl-tests
          const double t = timer.time(s, fmt::format("calibration all-reduce of {} B on rank {}", sizes[i], r), [&] {
            for (int k = 0; k < iters; ++k) launch(sizes[i], inplace != 0);
          });
          times[static_cast<size_t>(r)][i][static_cast<size_t>(inplace)] = t / iters;
        }
      }
      // GEMM alone, then beside a stream of 256 MiB all-reduces
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
      timer.time(s, fmt::format("calibration all-reduces beside GEMMs on rank {}", r), [] {});
      cudaStreamDestroy(cs);
      cudaStreamDestroy(s);
    } catch (...) {
      errors[static_cast<size_t>(r)] = std::current_exception();
      failed = true;
    }
    destroy_comm(comm);  // nullptr when the watchdog aborted it
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(worker, r);
  for (auto& t : threads) t.join();
  // The world communicators: destroyed when healthy, aborted (once) after a failure, never touched twice.
  for (ncclComm_t& c : comms) {
    if (failed && c) {
      ncclCommAbort(c);
      c = nullptr;
    }
    destroy_comm(c);
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);

  cal.allreduce_world_size = world;
  if (world == 1) {  // nothing moves between ranks: no rows (a time of 0 would be an infinite bandwidth)
    log << "# all-reduce sweep: skipped on one GPU (pass --gpus N on a machine with N > 1 GPUs)\n";
    cudaStreamDestroy(stream);
    return cal;
  }
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
