#pragma once
// What one rank of a step holds on its GPU and which buffer each launch reads and writes, in elements of the
// layout's dtype. Host code, shared: the CUDA executor allocates and addresses its memory by it, the dry run lists
// it, ctest checks it without a GPU.
//
// - DDP, zero1 and DeepSpeed's stage 1: the whole weights and gradients (the layout's flat order, buckets
//   contiguous); the optimizer on its slice (all of it unsharded, the rank's 1/N otherwise); zero1's all-gathers in
//   place in the weights: each rank's part is its slice.
// - DeepSpeed's stage 2: the whole weights, the gradients only in DeepSpeed's contiguous bucket buffers (two with
//   overlap_comm, taken in turn: stage_1_and_2.py:945-948, :2048-2060) and the rank's gradient partition, which the
//   optimizer reads.
// - Tensor parallelism: each tensor-group collective in place in `tensor_comm` (an all-gather's input is the rank's
//   slice of it, a reduce-scatter's output likewise).
// - Pipeline parallelism (a stage's plan): the stage's weights, gradients (its buckets) and optimizer state only;
//   its sends read `tensor_comm` (as large as the largest), its receives land in `p2p_recv` (the largest a
//   neighbour sends it); the tied embedding's all-reduce runs in place in `tensor_comm`.
// - FSDP zero2/zero3 (units): per unit, a flat parameter padded to a multiple of the N ranks (FlatParameter's
//   padding), of which each rank holds a 1/N shard of the weights and of the gradients; the weights are gathered into
//   `gathered` (zero2: every unit at once, kept from its forward to its backward; zero3: the root's region, kept, and
//   slots that the blocks' gathers take in turn: two with limit_all_gathers, one per block without), gradients are
//   written into one unit-sized unsharded buffer and reduce-scattered from it into the gradient shard; the optimizer
//   updates the weight shard.
// - FSDP zero3 with pipeline stages (a stage's plan): the stage's units only; each is gathered once into a region of
//   its own and kept for the step, and its gradients accumulate over the micro-batches in a region of their own until
//   its one reduce-scatter after the last backward (torchtitan's FSDP2 under pipelining; program_pipeline.cpp).
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "dpsim/backend/executor.hpp"
#include "dpsim/program.hpp"

namespace dpsim::backend {

enum class Buffer { none, weights, grads, weight_shard, grad_shard, gathered, unit_grads, tensor_comm, p2p_recv };
const char* to_string(Buffer buffer);

struct Span {
  Buffer buffer = Buffer::none;
  int64_t offset = 0;  // elements from the buffer's start
  int64_t numel = 0;
  bool operator==(const Span&) const = default;
};

// A collective's buffers: NCCL's send and receive (equal for an in-place all-reduce), `count` per rank as NCCL takes
// it (all-gather: the send count; reduce-scatter: the receive count).
struct CallBuffers {
  Span send, recv;
  int64_t count = 0;
};

struct UnitShard {
  int64_t numel = 0;         // the unit's parameters
  int64_t shard = 0;         // its padded numel / N: what each rank holds (0: another pipeline stage's unit)
  int64_t shard_offset = 0;  // in weight_shard and grad_shard
  int64_t grad_offset = 0;   // in unit_grads: 0 (one unit's at a time), or its own region under pipelining
  bool held = true;          // false: another pipeline stage's unit, nothing of it on this rank
};

struct ShardBuffers {
  bool fsdp = false;  // units: the rank holds shards
  int shards = 1;
  int rank = 0;
  int64_t weights_numel = 0, grads_numel = 0;            // DDP, zero1, DeepSpeed
  int64_t weight_shard_numel = 0, grad_shard_numel = 0;  // FSDP (DeepSpeed stage 2: its gradient partition)
  int64_t gathered_numel = 0, unit_grads_numel = 0;      // FSDP
  int64_t tensor_comm_numel = 0;     // tensor parallelism: the largest activation an operator f or g reduces or gathers
  int64_t p2p_recv_numel = 0;        // pipeline: the largest tensor a neighbouring stage sends this one
  int stage = -1;                    // the pipeline stage whose buffers these are; -1: no pipeline
  std::vector<int64_t> bucket_base;  // [bucket] -> where its gradients live in `grads` (flat: bucket_offset)
  std::vector<UnitShard> units;
  std::vector<int> unit_of_grad;        // [plan grad] -> unit (FSDP)
  std::vector<int64_t> offset_in_unit;  // [plan grad] -> elements from its unit's flat start (FSDP)
  Span optimizer;                       // the weights the update writes; its gradients are `optimizer_grads`
  Span optimizer_grads;
  std::map<std::tuple<int, int, int>, CallBuffers> calls;  // (kind, group, index) -> buffers
  std::vector<int64_t> gathered_at;  // [comm id] -> where an FSDP all-gather lands in `gathered`, -1 other

  int64_t numel_held() const {
    return weights_numel + grads_numel + weight_shard_numel + grad_shard_numel + gathered_numel + unit_grads_numel +
           tensor_comm_numel + p2p_recv_numel;
  }
  const CallBuffers& call(const CommCall& c) const;
  // A pipeline send's or receive's buffer (`send` or `recv`; the other is none) and its count.
  CallBuffers p2p(const P2POp& op) const;
  int element_bytes = 2;
};

// `layout` is make_layout's for the same plan (and stage); `rank` is the rank's index in the data group of the
// program's `group_size` ranks (1: a world of one, nothing is sharded away), `tensor_rank` its index in its tensor
// group. The tensor group's collectives (Megatron's f and g) run in place in one activation-sized buffer,
// `tensor_comm`. With pipeline stages, `stage`'s buffers (its rank class's calls, its optimizer's parameters).
ShardBuffers plan_shard_buffers(const StepPlan& plan, const StepProgram& program, const StepLayout& layout, int rank,
                                int tensor_rank = 0, int stage = 0);

// Where a gradient's weights are read and its gradient written, given where each unit was last gathered
// (`unit_base[u]`: its start in `gathered`; the executor updates it as it issues each unit's all-gather).
Span weight_span(const ShardBuffers& b, const StepLayout& layout, const StepPlan& plan, int grad,
                 const std::vector<int64_t>& unit_base);
Span grad_span(const ShardBuffers& b, const StepLayout& layout, const StepPlan& plan, int grad);

// "# buffers of rank R: ..." lines: each buffer's elements and bytes, and their sum.
std::string describe_buffers(const ShardBuffers& b, int element_bytes);

}  // namespace dpsim::backend
