// Pipeline transfers as batches (p2p_batch.hpp): read off the step program, then checked by a rendezvous of all
// stages.
#include "dpsim/p2p_batch.hpp"

#include <fmt/format.h>

#include <map>
#include <utility>

#include "dpsim/error.hpp"

namespace dpsim {

const char* to_string(P2PMoves moves) {
  switch (moves) {
    case P2PMoves::activations: return "activations";
    case P2PMoves::input_gradient: return "input-gradient";
    case P2PMoves::embedding_gradient: return "embedding-gradient";
  }
  return "?";
}

const char* to_string(P2POp::Type type) {
  switch (type) {
    case P2POp::Type::send: return "send";
    case P2POp::Type::recv: return "recv";
    case P2POp::Type::all_reduce: return "all_reduce";
  }
  return "?";
}

namespace {

std::string event_name(EventRef e) { return fmt::format("{}[{}]", to_string(e.kind), e.index); }

struct Sender {
  int stage = -1;
  const CommCall* call = nullptr;
  int received = 0;  // receives that wait for it
};

bool is_send(const CommCall& c) { return c.kind == CollectiveKind::send && c.delivers.kind != EventKind::none; }

EventMap<Sender> index_sends(const StepProgram& program) {
  EventMap<Sender> senders;
  for (const RankProgram& rank : program.classes)
    for (const CommCall& c : rank.comms) {
      if (!is_send(c)) continue;
      if (senders.contains(c.delivers))
        throw RuntimeError(fmt::format("program: {} is sent twice", event_name(c.delivers)));
      senders[c.delivers] = {rank.stage, &c, 0};
    }
  return senders;
}

// One class's batches; `senders` counts the receives of each send.
class BatchReader {
 public:
  BatchReader(const StepProgram& program, const RankProgram& rank, EventMap<Sender>& senders)
      : program_(program), rank_(rank), senders_(senders) {}

  std::vector<P2PBatch> read() {
    for (size_t i = 0; i < rank_.instrs.size(); ++i) {
      const Instr& in = rank_.instrs[i];
      if (const auto op = operation(in, static_cast<int>(i)))
        add(in.batch, *op, static_cast<int>(i));
      else if (!(in.type == Instr::Type::record && crosses_classes(in.event.kind)))
        open_ = -1;  // anything but a send's record ends the batch
    }
    return std::move(batches_);
  }

 private:
  std::optional<P2POp> operation(const Instr& in, int i) {
    if (in.type == Instr::Type::wait && crosses_classes(in.event.kind)) return receive(in, i);
    if (in.type != Instr::Type::collective) return std::nullopt;
    const CommCall& c = rank_.comms.at(static_cast<size_t>(in.comm));
    if (is_send(c))
      return P2POp{.type = P2POp::Type::send,
                   .peer = c.peer,
                   .bytes = c.bytes,
                   .moves = c.backward ? P2PMoves::input_gradient : P2PMoves::activations,
                   .event = c.delivers,
                   .instr = i};
    if (c.group != GroupKind::embedding) return std::nullopt;
    const int last = program_.dims.pipeline - 1;
    return P2POp{.type = P2POp::Type::all_reduce,
                 .peer = rank_.stage == 0 ? last : 0,
                 .bytes = c.bytes,
                 .moves = P2PMoves::embedding_gradient,
                 .event = {EventKind::none, c.index},
                 .instr = i};
  }

  P2POp receive(const Instr& in, int i) {
    Sender* s = senders_.find(in.event);
    if (!s)
      throw RuntimeError(fmt::format("program ({}): instruction {} receives {}, which no stage sends", rank_.rank_class,
                                     i, event_name(in.event)));
    if (++s->received > 1)
      throw RuntimeError(fmt::format("program ({}): {} is received twice", rank_.rank_class, event_name(in.event)));
    return P2POp{.type = P2POp::Type::recv,
                 .peer = s->stage,
                 .bytes = s->call->bytes,
                 .moves = in.event.kind == EventKind::gradient_sent ? P2PMoves::input_gradient : P2PMoves::activations,
                 .event = in.event,
                 .instr = i};
  }

  // An all-reduce (no batch number) is a batch of its own.
  void add(int batch, const P2POp& op, int i) {
    if (op.type == P2POp::Type::all_reduce || batch < 0 || batch != open_) {
      if (op.type != P2POp::Type::all_reduce && (batch < 0 || batch <= last_))
        throw RuntimeError(fmt::format(
            "program ({}): instruction {} ({} {}) is in batch {}, after batch {}: a batch's instructions must be "
            "consecutive and numbered in issue order",
            rank_.rank_class, i, to_string(op.type), event_name(op.event), batch, last_));
      batches_.push_back({.first_instr = i, .ops = {}});
      open_ = op.type == P2POp::Type::all_reduce ? -1 : batch;
      if (open_ >= 0) last_ = batch;
    }
    batches_.back().ops.push_back(op);
  }

  const StepProgram& program_;
  const RankProgram& rank_;
  EventMap<Sender>& senders_;
  std::vector<P2PBatch> batches_;
  int open_ = -1;  // the batch now being read; -1: none
  int last_ = -1;  // the highest batch number read so far
};

}  // namespace

std::vector<std::vector<P2PBatch>> p2p_batches(const StepProgram& program) {
  EventMap<Sender> senders = index_sends(program);
  std::vector<std::vector<P2PBatch>> result;
  result.reserve(program.classes.size());
  for (const RankProgram& rank : program.classes) result.push_back(BatchReader(program, rank, senders).read());
  for (const RankProgram& rank : program.classes)
    for (const CommCall& c : rank.comms)
      if (is_send(c) && senders.at(c.delivers).received == 0)
        throw RuntimeError(fmt::format("program ({}): {} is sent to stage {}, which never receives it", rank.rank_class,
                                       event_name(c.delivers), c.peer));
  return result;
}

namespace {

// NCCL pairs a sender's sends to one peer with the peer's receives from it in posted order.
std::optional<std::string> out_of_order(const StepProgram& program, const std::vector<std::vector<P2PBatch>>& batches) {
  std::map<std::pair<int, int>, std::pair<std::vector<EventRef>, std::vector<EventRef>>> lanes;  // (from, to)
  for (size_t c = 0; c < batches.size(); ++c) {
    const int stage = program.classes[c].stage;
    for (const P2PBatch& b : batches[c])
      for (const P2POp& op : b.ops) {
        if (op.type == P2POp::Type::send) lanes[{stage, op.peer}].first.push_back(op.event);
        if (op.type == P2POp::Type::recv) lanes[{op.peer, stage}].second.push_back(op.event);
      }
  }
  for (const auto& [pair, lane] : lanes) {
    const auto& [sends, recvs] = lane;
    for (size_t k = 0; k < sends.size() && k < recvs.size(); ++k)
      if (!(sends[k] == recvs[k]))
        return fmt::format(
            "stage {}'s send #{} to stage {} carries {}, but stage {}'s receive #{} from stage {} expects {} (NCCL "
            "pairs them in posted order)",
            pair.first, k, pair.second, event_name(sends[k]), pair.second, k, pair.first, event_name(recvs[k]));
  }
  return std::nullopt;
}

bool partners(const P2POp& a, int a_stage, const P2POp& b, int b_stage) {
  if (a.peer != b_stage || b.peer != a_stage) return false;
  if (a.type == P2POp::Type::all_reduce) return b.type == P2POp::Type::all_reduce && a.event == b.event;
  const bool opposite = (a.type == P2POp::Type::send && b.type == P2POp::Type::recv) ||
                        (a.type == P2POp::Type::recv && b.type == P2POp::Type::send);
  return opposite && a.event == b.event;
}

// Every stage posts its current batch; an operation completes when its partner is posted too; a batch ends when
// all of its operations have.
class Rendezvous {
 public:
  Rendezvous(const StepProgram& program, const std::vector<std::vector<P2PBatch>>& batches)
      : program_(program), batches_(batches), at_(batches.size(), 0), done_(batches.size()) {
    for (size_t c = 0; c < batches.size(); ++c) {
      class_of_[program.classes[c].stage] = static_cast<int>(c);
      reset(c);
    }
  }

  std::optional<std::string> run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t c = 0; c < batches_.size(); ++c)
        while (at_[c] < batches_[c].size() && advance(c)) progress = true;
    }
    std::string stuck;
    for (size_t c = 0; c < batches_.size(); ++c)
      if (at_[c] < batches_[c].size()) stuck += describe_stuck(c);
    if (stuck.empty()) return std::nullopt;
    return "the pipeline's transfers deadlock:" + stuck;
  }

 private:
  void reset(size_t c) { done_[c].assign(at_[c] < batches_[c].size() ? batches_[c][at_[c]].ops.size() : 0, false); }

  // Pairs what the current batch of class c can pair; true when the batch is complete (and c moved on).
  bool advance(size_t c) {
    const int stage = program_.classes[c].stage;
    const auto& ops = batches_[c][at_[c]].ops;
    for (size_t k = 0; k < ops.size(); ++k)
      if (!done_[c][k]) pair(c, stage, k);
    for (bool d : done_[c])
      if (!d) return false;
    ++at_[c];
    reset(c);
    return true;
  }

  void pair(size_t c, int stage, size_t k) {
    const P2POp& op = batches_[c][at_[c]].ops[k];
    const auto peer = class_of_.find(op.peer);
    if (peer == class_of_.end()) return;
    const auto p = static_cast<size_t>(peer->second);
    if (at_[p] >= batches_[p].size()) return;
    const auto& theirs = batches_[p][at_[p]].ops;
    for (size_t j = 0; j < theirs.size(); ++j)
      if (!done_[p][j] && partners(op, stage, theirs[j], op.peer)) {
        done_[c][k] = true;
        done_[p][j] = true;
        return;
      }
  }

  std::string describe_stuck(size_t c) const {
    const P2PBatch& b = batches_[c][at_[c]];
    std::string s = fmt::format(" {}: batch {} of {} (instruction {}) waits for", program_.classes[c].rank_class,
                                at_[c], batches_[c].size(), b.first_instr);
    for (size_t k = 0; k < b.ops.size(); ++k)
      if (!done_[c][k])
        s += fmt::format(" {} {} {} stage {};", to_string(b.ops[k].type), event_name(b.ops[k].event),
                         b.ops[k].type == P2POp::Type::send ? "to" : "with", b.ops[k].peer);
    return s;
  }

  const StepProgram& program_;
  const std::vector<std::vector<P2PBatch>>& batches_;
  std::vector<size_t> at_;               // per class: its current batch
  std::vector<std::vector<bool>> done_;  // per class: which operations of its current batch have completed
  std::map<int, int> class_of_;          // stage -> class
};

}  // namespace

std::optional<std::string> p2p_deadlock(const StepProgram& program, const std::vector<std::vector<P2PBatch>>& batches) {
  if (batches.size() != program.classes.size())
    throw RuntimeError(
        fmt::format("p2p_deadlock: batches of {} classes for a program of {}", batches.size(), program.classes.size()));
  if (auto order = out_of_order(program, batches)) return order;
  return Rendezvous(program, batches).run();
}

}  // namespace dpsim
