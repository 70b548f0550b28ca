#pragma once
// Pipeline parallelism's transfers between stages, as a rank posts them: the step program's sends and receives
// grouped into the batches it numbers (Instr::batch; NCCL groups, Megatron's batch_isend_irecv), plus the tied
// embedding's all-reduce between the first and the last stage. Derived from the StepProgram only (the schedule is
// written once, in core/program_pipeline.cpp), and checked: a rendezvous of every stage's batches must run to the
// end (p2p_deadlock). Pure functions.
#include <optional>
#include <string>
#include <vector>

#include "dpsim/program.hpp"

namespace dpsim {

// What a transfer carries: a stage's output activations (forward), its input's gradient (backward), or the tied
// word embedding's gradient (the all-reduce between the first and the last stage).
enum class P2PMoves { activations, input_gradient, embedding_gradient };
const char* to_string(P2PMoves moves);

struct P2POp {
  enum class Type { send, recv, all_reduce };
  Type type = Type::send;
  int peer = -1;     // the other stage
  double bytes = 0;  // send, recv: the tensor's bytes (the sender's CommCall); all_reduce: the buffer size
  P2PMoves moves = P2PMoves::activations;
  EventRef event{};  // send, recv: the transfer's event (CommCall::delivers); all_reduce: {none, the call index}
  int instr = -1;    // the instruction that states it (send, all_reduce: the collective; recv: the wait)
};
const char* to_string(P2POp::Type type);

// One NCCL group: its operations, posted together, before instruction `first_instr`'s position is passed.
struct P2PBatch {
  int first_instr = -1;
  std::vector<P2POp> ops;
};

// The batches of every rank class of `program` (result[c] for program.classes[c], in issue order); empty lists
// for a program without pipeline stages. Throws RuntimeError for a receive no stage sends, a send received by no
// stage or twice, or a batch whose instructions are not consecutive.
std::vector<std::vector<P2PBatch>> p2p_batches(const StepProgram& program);

// Whether the stages, each posting its batches in order and each batch complete only once every operation in it has
// met its partner (the matching receive, send or all-reduce, posted by the peer in its current batch: NCCL's
// rendezvous, nothing buffered), can all run to the end; and whether each (sender, receiver) pair's sends and
// receives pair up in the same order (NCCL matches them first in, first out). nullopt: they can; else what blocks
// (each stuck stage, its batch and what it waits for) or which transfers are out of order.
std::optional<std::string> p2p_deadlock(const StepProgram& program, const std::vector<std::vector<P2PBatch>>& batches);

}  // namespace dpsim
