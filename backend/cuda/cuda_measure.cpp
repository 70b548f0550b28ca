// `dpsim measure` on GPUs: machine query, communicators (threads on one node, or MPI ranks),
// the warm-up/timed loop on every GPU, and the result.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <ostream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#ifdef DPSIM_MPI
#include <mpi.h>
#endif

#include "device.hpp"
#include "dpsim/backend/cuda.hpp"
#include "dpsim/error.hpp"
#include "dpsim/launcher.hpp"
#include "dpsim/pipeline_schedule.hpp"

namespace dpsim::backend {

using namespace cuda;

namespace {

std::string version_code(int code) {  // NCCL/cuBLAS: major*10000 + minor*100 + patch
  return fmt::format("{}.{}.{}", code / 10000, (code / 100) % 100, code % 100);
}
std::string cuda_version(int code) { return fmt::format("{}.{}", code / 1000, (code % 1000) / 10); }

std::string kernel_module_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(in, line)) return "";
  std::istringstream words(line);
  std::string w, prev;
  while (words >> w) {  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.03  <date>"
    if (prev == "Module") return w;
    prev = w;
  }
  return "";
}

// ---- MPI (optional) ---------------------------------------------------------------------------

struct MpiWorld {
  bool active = false;
  int rank = 0, size = 1, local_rank = 0;
};

MpiWorld& mpi_world() {
  static MpiWorld world = [] {
    MpiWorld w;
#ifdef DPSIM_MPI
    if (mpi_launch().size > 1) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
      });
      MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
      MPI_Comm_size(MPI_COMM_WORLD, &w.size);
      MPI_Comm local;
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local);
      MPI_Comm_rank(local, &w.local_rank);
      MPI_Comm_free(&local);
      w.active = w.size > 1;
    }
#endif
    return w;
  }();
  return world;
}

// One rank's samples as doubles for MPI_Gather: the same count on every rank (every sample carries every bucket).
std::vector<double> flatten(const std::vector<StepSample>& samples) {
  std::vector<double> v;
  for (const auto& s : samples) {
    v.insert(v.end(), {s.step_s, s.forward_s, s.backward_s, s.optimizer_s, s.backward_end_s, s.optimizer_begin_s,
                       static_cast<double>(s.stage), s.tensor_comm_s, s.p2p_s, s.neighbour_wait_s, s.exposed_comm_s});
    for (const auto& b : s.buckets) v.insert(v.end(), {b.ready_s, b.start_s, b.end_s});
  }
  return v;
}

std::vector<StepSample> unflatten(const double* v, size_t iters, size_t buckets) {
  std::vector<StepSample> out(iters);
  for (auto& s : out) {
    s.step_s = *v++;
    s.forward_s = *v++;
    s.backward_s = *v++;
    s.optimizer_s = *v++;
    s.backward_end_s = *v++;
    s.optimizer_begin_s = *v++;
    s.stage = static_cast<int>(*v++);
    s.tensor_comm_s = *v++;
    s.p2p_s = *v++;
    s.neighbour_wait_s = *v++;
    s.exposed_comm_s = *v++;
    s.buckets.resize(buckets);
    for (auto& b : s.buckets) {
      b.ready_s = *v++;
      b.start_s = *v++;
      b.end_s = *v++;
    }
  }
  return out;
}

}  // namespace

bool is_output_rank() { return mpi_world().rank == 0; }

MachineInfo query_machine() {
  MachineInfo info;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    throw RuntimeError(
        fmt::format("no CUDA device is usable here ({}); dpsim measure needs an NVIDIA GPU and its driver, "
                    "dpsim measure --dry-run shows what it would launch",
                    err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount returned 0"));
  for (int d = 0; d < count; ++d) {
    MachineGpu g;
    g.index = d;
    g.name = device_name(d);
    size_t free_b = 0, total_b = 0;
    check(cudaSetDevice(d), "cudaSetDevice");
    check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    g.free_bytes = static_cast<double>(free_b);
    g.total_bytes = static_cast<double>(total_b);
    info.gpus.push_back(g);
  }
  int drv = 0, rt = 0, nccl = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  ncclGetVersion(&nccl);
  const std::string module = kernel_module_version();
  info.driver_version = (module.empty() ? std::string() : module + " ") + "(CUDA driver API " + cuda_version(drv) + ")";
  info.cuda_runtime_version = cuda_version(rt);
  info.nccl_version = version_code(nccl);
  info.cublas_version = version_code(static_cast<int>(cublasLtGetVersion()));
  return info;
}

std::vector<void*> make_local_communicators(int count, double timeout_s) {
  std::vector<int> devices;
  for (int i = 0; i < count; ++i) devices.push_back(i);
  std::vector<void*> out;
  for (ncclComm_t c : init_local_comms(devices, timeout_s)) out.push_back(c);
  return out;
}

void destroy_communicator(void* comm) {
  if (comm) ncclCommDestroy(static_cast<ncclComm_t>(comm));
}

namespace {

// What this GPU runs of the kernels the binary carries.
std::string kernel_image_text(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  const KernelImage k = loaded_kernel_image();
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  const int cc = prop.major * 10 + prop.minor;
  return fmt::format("sm_{} machine code on an sm_{} GPU (PTX version {}){}", k.binary_version, cc, k.ptx_version,
                     k.binary_version == cc ? "" : ": not this GPU's own code");
}

// Under mpirun one rank's failure would leave the others blocked in MPI_Gather (or in NCCL): say why on stderr
// and end the whole job, with dpsim's exit status (2 for bad input, 1 otherwise).
[[noreturn]] void abort_mpi_job(const MpiWorld& mpi, const std::exception& e) {
  std::cerr << fmt::format("dpsim measure: rank {} of {}: {}\n", mpi.rank, mpi.size, e.what()) << std::flush;
#ifdef DPSIM_MPI
  MPI_Abort(MPI_COMM_WORLD, dynamic_cast<const InputError*>(&e) ? 2 : 1);
#endif
  std::abort();
}

StepResult measure_job(const Scenario& scenario, const StepPlan& plan, const MeasureOptions& opt,
                       const std::string& scenario_file, std::ostream& log);

}  // namespace

StepResult measure_on_gpus(const Scenario& scenario, const StepPlan& plan, const MeasureOptions& opt,
                           const std::string& scenario_file, std::ostream& log) {
  MpiWorld& mpi = mpi_world();
  if (!mpi.active) return measure_job(scenario, plan, opt, scenario_file, log);
  try {
    return measure_job(scenario, plan, opt, scenario_file, log);
  } catch (const std::exception& e) {
    abort_mpi_job(mpi, e);
  }
}

namespace {

StepResult measure_job(const Scenario& scenario, const StepPlan& plan, const MeasureOptions& opt,
                       const std::string& scenario_file, std::ostream& log) {
  if (scenario.training.grad_dtype != scenario.training.param_dtype)
    throw InputError(
        fmt::format("the GPU backend runs gradients in the parameters' dtype; the scenario has {} parameters and {} "
                    "gradients",
                    to_string(scenario.training.param_dtype), to_string(scenario.training.grad_dtype)));
  MpiWorld& mpi = mpi_world();
  const MachineInfo info = query_machine();
  const bool out = mpi.rank == 0;

  // Which GPUs: threads on this node, or (under mpirun) this rank's local GPU.
  std::vector<int> devices;
  int world = 0;
  if (mpi.active) {
    world = mpi.size;
    if (opt.gpus == 0 && world != scenario.world_size())
      throw RuntimeError(
          fmt::format("scenario '{}' needs {} GPU(s), mpirun started {} rank(s); pass --gpus {} to record the "
                      "difference",
                      scenario.name, scenario.world_size(), world, world));
    if (opt.gpus != 0 && world != opt.gpus)
      throw RuntimeError(
          fmt::format("--gpus {}, and mpirun started {} rank(s): pass --gpus {}", opt.gpus, world, world));
    const int local = mpi.local_rank % static_cast<int>(info.gpus.size());
    if (!same_gpu_model(scenario.topology.gpu.name, info.gpus[local].name) && opt.gpus == 0)
      throw RuntimeError(
          fmt::format("rank {}: GPU {} is a '{}', the scenario's cluster has '{}'; pass --gpus N to measure anyway",
                      mpi.rank, local, info.gpus[local].name, scenario.topology.gpu.name));
    devices.push_back(local);
  } else {
    const GpuSelection sel = select_gpus(scenario, opt.gpus, info.gpus);
    for (const auto& w : sel.warnings) log << "dpsim measure: note: " << w << "\n";
    for (int i = 0; i < sel.count; ++i) devices.push_back(i);
    world = sel.count;
  }

  if (const std::string note = optimizer_impl_note(scenario); !note.empty() && out)
    log << "dpsim measure: note: " << note << "\n";

  // The run's own scenario and plan: the scenario's on `world` GPUs where --gpus changed the count (its data-parallel
  // degree, groups and shards; scenario_on_gpus), else the scenario's.
  const Scenario run_scenario = scenario_on_gpus(scenario_file, scenario, world);
  const StepPlan run_plan = world == scenario.world_size() ? plan : make_step_plan(run_scenario);
  const Elem elem = elem_of(scenario.training.param_dtype);
  // Each local GPU's rank runs its pipeline stage's program (rank_stage; 0 without stages) in that stage's layout: its
  // own gradients and buckets only (make_layout's `stage`); without stages the whole model's.
  const bool staged = plan.pipeline.stages > 1;
  std::vector<int> ranks;
  for (size_t i = 0; i < devices.size(); ++i) ranks.push_back(mpi.active ? mpi.rank : static_cast<int>(i));
  std::map<int, StepLayout> layouts;
  for (int rank : ranks) {
    const int stage = rank_stage(run_plan, rank);
    if (!layouts.count(stage))
      layouts.emplace(
          stage, make_layout(run_plan, elem_bytes(elem), scenario.ddp.gradient_as_bucket_view, staged ? stage : -1));
  }

  // NCCL_ALGO / NCCL_PROTO from the scenario, before any communicator exists.
  std::vector<std::string> notes;
  const auto nccl_env = apply_nccl_environment(scenario.collective, notes);
  if (out)
    for (const auto& n : notes) log << "dpsim measure: note: " << n << "\n";
  const std::string image = kernel_image_text(devices[0]);

  // World communicators (non-blocking: their initialisation times out); each executor splits its groups' from them.
  std::vector<ncclComm_t> comms;
  if (mpi.active) {
#ifdef DPSIM_MPI
    ncclUniqueId id;
    if (mpi.rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    comms.push_back(init_rank_comm(id, world, mpi.rank, devices[0], opt.watchdog_s));
#endif
  } else if (world > 1) {  // one GPU needs no communicator: the walker issues no collective on a group of one
    comms = init_local_comms(devices, opt.watchdog_s);
  }
  if (comms.empty()) comms.assign(devices.size(), nullptr);  // (an MPI build without MPI at run time)
  if (out) {
    log << fmt::format(
        "dpsim measure: {} on {} x {} ({} bucket(s), {} parameters, sharding {}{}), warm-up {}, timed {}\n",
        scenario.name, world, info.gpus[devices[0]].name, run_plan.buckets.size(), run_plan.parameters,
        to_string(run_plan.sharded.sharding),
        staged ? fmt::format(", {} pipeline stages {}", plan.pipeline.stages, to_string(plan.pipeline.schedule)) : "",
        opt.warmup, opt.iters);
    log << fmt::format("dpsim measure: kernels: {}; the binary carries {}\n", image, built_architectures());
    log << fmt::format("dpsim measure: NCCL_ALGO {}, NCCL_PROTO {}\n", nccl_env[0].second, nccl_env[1].second);
  }

  const size_t local_n = devices.size();
  std::vector<std::vector<StepSample>> samples(local_n);
  std::vector<double> single(local_n, 0.0), allocated(local_n, 0.0);
  std::vector<std::exception_ptr> errors(local_n);
  std::atomic<bool> failed{false};
  std::mutex log_mutex;
  auto worker = [&](size_t i) {
    try {
      check(cudaSetDevice(devices[i]), "cudaSetDevice");
      CudaExecutorConfig cfg;
      cfg.device = devices[i];
      cfg.rank = ranks[i];
      cfg.world = world;
      cfg.nccl_comm = comms[i];
      cfg.dtype = scenario.training.param_dtype;
      cfg.tf32 = scenario.training.tf32;
      cfg.optimizer = scenario.training.optimizer;
      cfg.watchdog_s = opt.watchdog_s;
      cfg.abort_flag = &failed;
      const int stage = rank_stage(run_plan, cfg.rank);
      const StepLayout& layout = layouts.at(stage);
      CudaExecutor ex(run_plan, layout, cfg);
      allocated[i] = ex.allocated_bytes();
      WalkOptions wo;
      wo.gradient_accumulation = run_plan.gradient_accumulation;
      wo.stage = stage;
      const PreparedStep step = prepare_step(run_plan, wo.gradient_accumulation);  // once, not per iteration
      run_iterations(opt.warmup, opt.iters, [&](int it, bool timed) {
        walk_step(run_plan, layout, wo, step, ex);
        StepSample s = ex.finish_step();
        if (cfg.rank == 0) {
          std::lock_guard<std::mutex> lock(log_mutex);
          log << fmt::format("  iteration {:3} {}: step {:.4f} s (forward {:.4f}, backward {:.4f}, optimizer {:.4f})\n",
                             it, timed ? "timed  " : "warm-up", s.step_s, s.forward_s, s.backward_s, s.optimizer_s);
        }
        if (timed) samples[i].push_back(std::move(s));
      });
      // A stage holds its own gradients only: no all-gradient message to time (allreduce.nccl stays the model's).
      single[i] = staged ? 0.0 : ex.time_single_allreduce(3);
    } catch (...) {
      errors[i] = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 0; i < local_n; ++i) threads.emplace_back(worker, i);
  for (auto& t : threads) t.join();
  // The world communicators: the executors' own (split) ones are gone; these are destroyed, or aborted once
  // after a failure (a peer may be gone), never both.
  for (ncclComm_t& c : comms) {
    if (failed && c) {
      ncclCommAbort(c);
      c = nullptr;
    }
    destroy_comm(c);
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);

  // Gather every rank's samples on rank 0 (MPI), or use the threads' directly.
  std::vector<std::vector<StepSample>> all = samples;
  double single_max = *std::max_element(single.begin(), single.end());
#ifdef DPSIM_MPI
  if (mpi.active) {
    const std::vector<double> mine = flatten(samples[0]);
    std::vector<double> gathered(out ? mine.size() * static_cast<size_t>(world) : 0);
    MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, gathered.data(), static_cast<int>(mine.size()),
               MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double s = single_max;
    MPI_Reduce(&s, &single_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (out) {
      all.clear();
      for (int r = 0; r < world; ++r)
        all.push_back(unflatten(gathered.data() + static_cast<size_t>(r) * mine.size(), samples[0].size(),
                                run_plan.buckets.size()));
    }
  }
#endif
  (void)unflatten;

  MeasureContext ctx;
  ctx.gpu_name = info.gpus[devices[0]].name;
  ctx.gpu_count = world;
  ctx.scenario_world_size = scenario.world_size();
  ctx.driver_version = info.driver_version;
  ctx.cuda_runtime_version = info.cuda_runtime_version;
  ctx.nccl_version = info.nccl_version;
  ctx.cublas_version = info.cublas_version;
  ctx.host = host_name();
  ctx.git_revision = git_revision();
  ctx.scenario_hash = scenario_hash(scenario_file);
  ctx.gpu_memory_bytes = info.gpus[devices[0]].total_bytes;
  ctx.gpu_free_bytes = info.gpus[devices[0]].free_bytes;
  ctx.warmup = opt.warmup;
  ctx.iters = opt.iters;
  ctx.watchdog_s = opt.watchdog_s;
  ctx.single_allreduce_s = single_max;
  ctx.cuda_architectures = built_architectures();
  ctx.kernel_image = image;
  ctx.nccl_env = nccl_env;
  StepResult result = assemble_result(run_scenario, run_plan, ctx, all);
  result.context["gpu_allocated_bytes"] = allocated[0];
  result.context["gpu_free_bytes_after_allocation"] = info.gpus[devices[0]].free_bytes - allocated[0];
  result.context["mpi_ranks"] = mpi.active ? mpi.size : 1;
  return result;
}

}  // namespace

}  // namespace dpsim::backend
