#pragma once
// Properties every launch sequence of one DDP step must have (used on the tiny plan and on every
// shipped scenario's plan).
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "dpsim/backend/executor.hpp"

namespace dpsim::test {

using backend::EventKind;
using backend::Launch;
using backend::Mark;
using backend::Stream;

struct SequenceFacts {
  std::vector<int> allreduce_order;  // buckets in launch order
  std::vector<int> backward_ops;     // op of each backward launch group, synced micro-step, in order
  std::vector<int> ready_after_op;   // per bucket: the op whose backward launches precede its ready event
};

inline SequenceFacts check_sequence(const StepPlan& plan, const backend::StepLayout& layout,
                                    const std::vector<Launch>& seq) {
  SequenceFacts f;
  const int nb = static_cast<int>(plan.buckets.size());
  const int64_t k = std::max<int64_t>(1, plan.gradient_accumulation);
  std::map<int, size_t> ready_at, done_at, allreduce_at, comm_wait_at;
  std::vector<size_t> forward_begins;
  size_t optimizer_at = 0, compute_wait_last = 0, last_forward_begin = 0;
  std::map<int, size_t> last_write;  // grad -> launch index of its last write (synced micro-step)
  int current_op = -1;
  bool in_backward = false;
  int micro = -1;
  for (size_t i = 0; i < seq.size(); ++i) {
    const Launch& l = seq[i];
    switch (l.type) {
      case Launch::Type::mark:
        if (l.mark_kind == Mark::forward_begin) {
          forward_begins.push_back(i);
          last_forward_begin = i;
          ++micro;
          in_backward = false;
        }
        if (l.mark_kind == Mark::forward_end) in_backward = true;
        if (l.mark_kind == Mark::backward_end) in_backward = false;
        break;
      case Launch::Type::gemm:
      case Launch::Type::batched_gemm: {
        const auto& c = l.gemm_call;
        CHECK((l.type == Launch::Type::batched_gemm) == (c.batch > 1));
        if (c.role == backend::GemmRole::backward_weight) {
          if (c.grad >= 0) last_write[c.grad] = i;
          CHECK(c.accumulate == (micro > 0 && c.grad >= 0));  // accumulation micro-steps add into the bucket
        }
        if (in_backward && micro == k - 1 && c.op != current_op) {
          current_op = c.op;
          f.backward_ops.push_back(c.op);
        }
        break;
      }
      case Launch::Type::memory: {
        const auto& m = l.memory_call;
        if (m.grad >= 0) last_write[m.grad] = i;
        if (in_backward && micro == k - 1 && m.op >= 0 && m.op != current_op) {
          current_op = m.op;
          f.backward_ops.push_back(m.op);
        }
        break;
      }
      case Launch::Type::record:
        if (l.event.kind == EventKind::bucket_ready) {
          CHECK(l.stream == Stream::compute);
          CHECK(ready_at.count(l.bucket) == 0);
          ready_at[l.bucket] = i;
          f.ready_after_op.push_back(current_op);
        } else {
          CHECK(l.stream == Stream::comm);
          done_at[l.bucket] = i;
        }
        break;
      case Launch::Type::wait:
        if (l.stream == Stream::comm) {
          CHECK(l.event.kind == EventKind::bucket_ready);
          comm_wait_at[l.bucket] = i;
        } else {
          CHECK(l.event.kind == EventKind::bucket_done);
          CHECK(l.bucket == nb - 1);  // the optimizer waits for the last bucket
          compute_wait_last = i;
        }
        break;
      case Launch::Type::allreduce:
        CHECK(l.stream == Stream::comm);
        f.allreduce_order.push_back(l.bucket);
        allreduce_at[l.bucket] = i;
        break;
      case Launch::Type::collective: FAIL("a DDP step launches no collective but bucket all-reduces"); break;
      case Launch::Type::send:
      case Launch::Type::recv:
      case Launch::Type::stage_work: FAIL("a DDP step launches no pipeline transfer and times no stage"); break;
      case Launch::Type::optimizer: optimizer_at = i; break;
    }
  }
  REQUIRE(forward_begins.size() == static_cast<size_t>(k));
  // Buckets: all-reduced strictly in order, each after its ready event and the comm stream's wait.
  REQUIRE(f.allreduce_order.size() == static_cast<size_t>(nb));
  for (int b = 0; b < nb; ++b) {
    CHECK(f.allreduce_order[static_cast<size_t>(b)] == b);
    REQUIRE(ready_at.count(b) == 1);
    CHECK(ready_at[b] > last_forward_begin);  // only on the synced micro-step
    CHECK(ready_at[b] < comm_wait_at[b]);
    CHECK(comm_wait_at[b] < allreduce_at[b]);
    CHECK(allreduce_at[b] < done_at[b]);
    if (b > 0) CHECK(ready_at[b - 1] < ready_at[b]);
    // Every gradient of the bucket is written before its event.
    for (int g : plan.buckets[static_cast<size_t>(b)].grads) {
      REQUIRE(last_write.count(g) == 1);
      CHECK(last_write[g] < ready_at[b]);
      CHECK(last_write[g] > last_forward_begin);
    }
  }
  // The optimizer runs after the compute stream waited for the last all-reduce.
  if (nb > 0) {
    CHECK(compute_wait_last > allreduce_at[nb - 1]);
    CHECK(optimizer_at > compute_wait_last);
  }
  CHECK(optimizer_at > 0);
  (void)layout;
  return f;
}

}  // namespace dpsim::test
