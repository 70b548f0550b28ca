// The plan walker: one DDP training step of a StepPlan through any Executor.
#include <algorithm>
#include <map>
#include <stdexcept>

#include "dpsim/backend/executor.hpp"
#include "dpsim/error.hpp"

namespace dpsim::backend {

const char* to_string(Stream stream) { return stream == Stream::compute ? "compute" : "comm"; }

const char* to_string(GemmRole role) {
  switch (role) {
    case GemmRole::forward: return "fwd";
    case GemmRole::backward_input: return "bwd-dX";
    case GemmRole::backward_weight: return "bwd-dW";
  }
  return "?";
}

const char* to_string(MemoryRole role) {
  switch (role) {
    case MemoryRole::forward: return "fwd";
    case MemoryRole::backward: return "bwd";
    case MemoryRole::grad_fill: return "grad-fill";
    case MemoryRole::scatter_add: return "scatter-add";
    case MemoryRole::grad_to_bucket: return "grad->bucket";
    case MemoryRole::bucket_to_grad: return "bucket->grad";
  }
  return "?";
}

const char* to_string(Mark mark) {
  switch (mark) {
    case Mark::step_begin: return "step_begin";
    case Mark::forward_begin: return "forward_begin";
    case Mark::forward_end: return "forward_end";
    case Mark::backward_end: return "backward_end";
    case Mark::bucket_start: return "bucket_start";
    case Mark::bucket_end: return "bucket_end";
    case Mark::optimizer_begin: return "optimizer_begin";
    case Mark::optimizer_end: return "optimizer_end";
  }
  return "?";
}

StepLayout make_layout(const StepPlan& plan, int element_bytes, bool gradient_as_bucket_view) {
  if (element_bytes <= 0) throw RuntimeError("make_layout: element size must be > 0");
  StepLayout layout;
  layout.element_bytes = element_bytes;
  layout.bucket_view = gradient_as_bucket_view;
  layout.grads.resize(plan.grads.size());
  layout.gemm_grad.resize(plan.ops.size());
  for (size_t o = 0; o < plan.ops.size(); ++o) layout.gemm_grad[o].assign(plan.ops[o].gemms.size(), -1);

  // GEMM <-> gradient: a weight gradient dW [k, n] of a non-batched GEMM with k*n == numel.
  for (size_t o = 0; o < plan.ops.size(); ++o) {
    const PlanOp& op = plan.ops[o];
    for (int g : op.grads) {
      if (g < 0 || g >= static_cast<int>(plan.grads.size()))
        throw RuntimeError("plan op '" + op.name + "' names gradient " + std::to_string(g) + ", out of range");
      if (op.kind == OpKind::embedding) continue;  // written by the scatter-add
      for (size_t j = 0; j < op.gemms.size(); ++j) {
        const GemmShape& s = op.gemms[j];
        if (layout.gemm_grad[o][j] < 0 && s.batch == 1 && s.k * s.n == plan.grads[g].numel) {
          layout.gemm_grad[o][j] = g;
          layout.grads[g].gemm = static_cast<int>(j);
          break;
        }
      }
    }
  }

  // Buckets: contiguous in bucket order; gradients in each bucket's ready order.
  int64_t flat = 0;
  std::vector<bool> placed(plan.grads.size(), false);
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    layout.bucket_offset.push_back(flat);
    int64_t within = 0;
    for (int g : plan.buckets[b].grads) {
      if (g < 0 || g >= static_cast<int>(plan.grads.size()) || placed[g])
        throw RuntimeError("plan bucket " + std::to_string(b) + " names gradient " + std::to_string(g) +
                           " out of range or twice");
      placed[g] = true;
      layout.grads[g].flat_offset = flat + within;
      layout.grads[g].bucket_offset = within;
      within += plan.grads[g].numel;
    }
    layout.bucket_numel.push_back(within);
    flat += within;
  }
  for (size_t g = 0; g < placed.size(); ++g)
    if (!placed[g]) throw RuntimeError("plan gradient '" + plan.grads[g].name + "' is in no bucket");
  layout.total_numel = flat;
  return layout;
}

namespace {

GemmCall make_gemm(int op, int j, const GemmShape& s, GemmRole role) {
  GemmCall c;
  c.op = op;
  c.gemm = j;
  c.role = role;
  c.batch = s.batch;
  switch (role) {  // forward shape: X [m,k] W [k,n] -> Y [m,n]
    case GemmRole::forward:
      c.m = s.m;
      c.n = s.n;
      c.k = s.k;
      break;
    case GemmRole::backward_input:
      c.m = s.m;
      c.n = s.k;
      c.k = s.n;
      break;  // dX = dY W^T
    case GemmRole::backward_weight:
      c.m = s.k;
      c.n = s.n;
      c.k = s.m;
      break;  // dW = X^T dY
  }
  return c;
}

void launch_gemm(Executor& ex, const GemmCall& c) {
  if (c.batch > 1)
    ex.batched_gemm(c);
  else
    ex.gemm(c);
}

}  // namespace

void walk_step(const StepPlan& plan, const StepLayout& layout, const WalkOptions& options, Executor& ex) {
  const int64_t micro_steps = std::max<int64_t>(1, options.gradient_accumulation);
  const int nops = static_cast<int>(plan.ops.size());
  const int nbuckets = static_cast<int>(plan.buckets.size());

  // Buckets completed after each backward position, in bucket order.
  std::map<int, std::vector<int>> completes_at;
  for (int b = 0; b < nbuckets; ++b) completes_at[plan.buckets[b].ready_after_backward_op].push_back(b);
  for (auto& [pos, list] : completes_at) std::sort(list.begin(), list.end());

  ex.mark(Stream::compute, Mark::step_begin, 0);
  for (int64_t micro = 0; micro < micro_steps; ++micro) {
    const bool sync = micro == micro_steps - 1;  // DDP: no_sync() on the first k-1 micro-steps
    const bool accumulate = micro > 0;
    const int mi = static_cast<int>(micro);

    ex.mark(Stream::compute, Mark::forward_begin, mi);
    for (int o = 0; o < nops; ++o) {
      const PlanOp& op = plan.ops[o];
      if (op.kind == OpKind::embedding || op.forward_bytes > 0) {
        MemoryCall m;
        m.op = o;
        m.role = MemoryRole::forward;
        m.bytes = op.forward_bytes;
        ex.memory_kernel(m);
      }
      for (size_t j = 0; j < op.gemms.size(); ++j)
        launch_gemm(ex, make_gemm(o, static_cast<int>(j), op.gemms[j], GemmRole::forward));
    }
    ex.mark(Stream::compute, Mark::forward_end, mi);

    int next_bucket = 0;  // buckets are launched strictly in order
    for (size_t pos = 0; pos < plan.backward_order.size(); ++pos) {
      const int o = plan.backward_order[pos];
      if (o < 0 || o >= nops)
        throw RuntimeError("plan backward_order names op " + std::to_string(o) + ", out of range");
      const PlanOp& op = plan.ops[o];
      double grad_bytes = 0;
      for (int g : op.grads) grad_bytes += static_cast<double>(plan.grads[g].bytes);
      // Elementwise backward traffic; the DDP grad->bucket copy is launched on its own below.
      const double copy_bytes = layout.bucket_view ? 0.0 : 2.0 * grad_bytes;
      const double elementwise = std::max(0.0, op.backward_bytes - copy_bytes);
      if (elementwise > 0) {
        MemoryCall m;
        m.op = o;
        m.role = MemoryRole::backward;
        m.bytes = elementwise;
        ex.memory_kernel(m);
      }
      for (size_t j = 0; j < op.gemms.size(); ++j) {
        const GemmShape& s = op.gemms[j];
        GemmCall dx = make_gemm(o, static_cast<int>(j), s, GemmRole::backward_input);
        launch_gemm(ex, dx);
        GemmCall dw = make_gemm(o, static_cast<int>(j), s, GemmRole::backward_weight);
        dw.grad = layout.gemm_grad[o][j];
        dw.accumulate = accumulate && dw.grad >= 0;
        launch_gemm(ex, dw);
      }
      for (int g : op.grads) {
        if (layout.grads[g].gemm >= 0) continue;
        MemoryCall m;
        m.op = o;
        m.role = op.kind == OpKind::embedding ? MemoryRole::scatter_add : MemoryRole::grad_fill;
        m.grad = g;
        m.bucket = plan.grads[g].bucket;
        m.bytes = op.kind == OpKind::embedding ? static_cast<double>(plan.grads[g].bytes)
                                               : 2.0 * static_cast<double>(plan.grads[g].bytes);
        m.accumulate = accumulate;
        ex.memory_kernel(m);
      }
      if (!layout.bucket_view) {
        for (int g : op.grads) {
          MemoryCall m;
          m.op = o;
          m.role = MemoryRole::grad_to_bucket;
          m.grad = g;
          m.bucket = plan.grads[g].bucket;
          m.bytes = 2.0 * static_cast<double>(plan.grads[g].bytes);
          ex.memory_kernel(m);
        }
      }
      if (!sync) continue;
      auto it = completes_at.find(static_cast<int>(pos));
      if (it == completes_at.end()) continue;
      for (int b : it->second) {
        if (b != next_bucket)
          throw RuntimeError("plan bucket " + std::to_string(b) + " completes before bucket " +
                             std::to_string(next_bucket) + ": DDP launches buckets strictly in order");
        ++next_bucket;
        ex.record_event(Stream::compute, {EventKind::bucket_ready, b});
        ex.stream_wait(Stream::comm, {EventKind::bucket_ready, b});
        ex.mark(Stream::comm, Mark::bucket_start, b);
        ex.allreduce_bucket(b);
        ex.mark(Stream::comm, Mark::bucket_end, b);
        ex.record_event(Stream::comm, {EventKind::bucket_done, b});
      }
    }
    ex.mark(Stream::compute, Mark::backward_end, mi);
    if (sync && next_bucket != nbuckets)
      throw RuntimeError("plan: " + std::to_string(nbuckets - next_bucket) +
                         " bucket(s) never complete (ready_after_backward_op beyond the backward)");
  }

  if (nbuckets > 0) ex.stream_wait(Stream::compute, {EventKind::bucket_done, nbuckets - 1});
  if (!layout.bucket_view) {
    for (int b = 0; b < nbuckets; ++b) {
      MemoryCall m;
      m.role = MemoryRole::bucket_to_grad;
      m.bucket = b;
      m.bytes = 2.0 * static_cast<double>(plan.buckets[b].bytes);
      ex.memory_kernel(m);
    }
  }
  ex.mark(Stream::compute, Mark::optimizer_begin, 0);
  ex.optimizer_step();
  ex.mark(Stream::compute, Mark::optimizer_end, 0);
}

}  // namespace dpsim::backend
