// The pipeline's sends and receives as batches (core/p2p_batch.cpp): read off the step program of the shipped 3D
// scenario under each schedule, pipeline degree and micro-batch count, and checked by the all-stage rendezvous.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../shipped_scenarios.hpp"
#include "../source_dir.hpp"
#include "dpsim/load.hpp"
#include "dpsim/p2p_batch.hpp"
#include "dpsim/plan.hpp"
#include "dpsim/program.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;

namespace {

StepPlan plan_of(const std::string& schedule, int stages, int micro, int virtual_stages = 1) {
  const Scenario s = load_scenario(std::string(DPSIM_SOURCE_DIR) + "/scenarios/llama3.1-70b-tp8-pp2-64xh100.yaml",
                                   {{"parallelism.pipeline", std::to_string(stages)},
                                    {"parallelism.schedule", schedule},
                                    {"parallelism.virtual_stages", std::to_string(virtual_stages)},
                                    {"training.gradient_accumulation", std::to_string(micro)}});
  return make_step_plan(s);
}

StepProgram pipeline(const std::string& schedule, int stages, int micro, int virtual_stages = 1) {
  return make_step_program(plan_of(schedule, stages, micro, virtual_stages));
}

struct Counts {
  int sends = 0, recvs = 0, all_reduces = 0, largest = 0;
  bool mixed_peers = false;  // a batch with operations for two different stages
};

Counts count(const std::vector<std::vector<P2PBatch>>& batches) {
  Counts n;
  for (const auto& stage : batches)
    for (const P2PBatch& b : stage) {
      n.largest = std::max(n.largest, static_cast<int>(b.ops.size()));
      for (const P2POp& op : b.ops) {
        n.sends += op.type == P2POp::Type::send ? 1 : 0;
        n.recvs += op.type == P2POp::Type::recv ? 1 : 0;
        n.all_reduces += op.type == P2POp::Type::all_reduce ? 1 : 0;
        n.mixed_peers = n.mixed_peers || op.peer != b.ops.front().peer;
      }
    }
  return n;
}

// Renumbers the batches of `rank` in issue order (a moved instruction keeps a number of its own).
void renumber(RankProgram& rank) {
  int last = -1, next = -1;
  for (Instr& in : rank.instrs) {
    if (in.batch < 0) continue;
    if (in.batch != last) ++next;
    last = in.batch;
    in.batch = next;
  }
}

}  // namespace

TEST_CASE("1F1B's, GPipe's and interleaving's batches pair up and run to the end at p = 2 and 4") {
  struct Case {
    std::string schedule;
    int stages, micro, virtual_stages;
  };
  const std::vector<Case> cases = {{"1f1b", 2, 1, 1},
                                   {"1f1b", 2, 3, 1},
                                   {"1f1b", 2, 16, 1},
                                   {"1f1b", 4, 2, 1},
                                   {"1f1b", 4, 4, 1},
                                   {"1f1b", 4, 9, 1},
                                   {"gpipe", 2, 1, 1},
                                   {"gpipe", 2, 5, 1},
                                   {"gpipe", 4, 3, 1},
                                   {"gpipe", 4, 8, 1},
                                   {"interleaved_1f1b", 2, 2, 2},
                                   {"interleaved_1f1b", 4, 4, 2},
                                   {"interleaved_1f1b", 4, 4, 5},
                                   {"interleaved_1f1b", 2, 6, 2},
                                   {"interleaved_1f1b", 4, 8, 2},
                                   {"interleaved_1f1b", 4, 12, 2},
                                   {"interleaved_1f1b", 4, 8, 5}};
  for (const Case& c : cases) {
    CAPTURE(c.schedule, c.stages, c.micro, c.virtual_stages);
    const StepProgram program = pipeline(c.schedule, c.stages, c.micro, c.virtual_stages);
    const auto batches = p2p_batches(program);
    REQUIRE(batches.size() == static_cast<size_t>(c.stages));
    const auto deadlock = p2p_deadlock(program, batches);
    CHECK(deadlock.value_or("none") == "none");
    const Counts n = count(batches);
    // Every boundary between virtual stages carries each micro-batch's activations forward and its gradient back.
    const int boundaries = c.stages * c.virtual_stages - 1;
    CHECK(n.sends == 2 * boundaries * c.micro);
    CHECK(n.recvs == n.sends);
    CHECK(n.all_reduces == 0);  // Llama 3.1's embedding is not tied
    // Without interleaving a batch pairs one send with one receive from the same neighbour at most (Megatron's
    // send_forward_recv_backward); interleaving's steady state posts both sends and both receives of a forward-backward
    // pair as one (send_forward_backward_recv_forward_backward), to and from both neighbours.
    CHECK(n.largest <= (c.virtual_stages == 1 ? 2 : 4));
    if (c.virtual_stages == 1) CHECK_FALSE(n.mixed_peers);
    if (c.virtual_stages > 1 && c.stages > 2) CHECK(n.mixed_peers);
  }
}

// Interleaving's steady state as Megatron posts it without overlap_p2p_comm (schedules.py @d98e8a6): a forward, a
// backward, then one group of the forward's output, the backward's input gradient and the next pair's two receives.
// Posted in slot order instead (each output sent right after its forward, as dpsim did before), these programs
// deadlock: every stage's backward sends its input gradient around the ring with no stage receiving.
TEST_CASE("interleaving's steady state sends a forward's output after the backward, in one group of four") {
  struct Case {
    int stages, micro, virtual_stages;
  };
  for (const Case& c : std::vector<Case>{{2, 6, 2}, {4, 8, 2}, {4, 12, 2}, {4, 8, 5}}) {
    CAPTURE(c.stages, c.micro, c.virtual_stages);
    const StepProgram program = pipeline("interleaved_1f1b", c.stages, c.micro, c.virtual_stages);
    const auto batches = p2p_batches(program);
    int groups_of_four = 0;
    for (size_t stage = 0; stage < batches.size(); ++stage) {
      const auto& instrs = program.classes[stage].instrs;
      for (const P2PBatch& b : batches[stage]) {
        if (b.ops.size() != 4) continue;
        ++groups_of_four;
        int activation_sends = 0, gradient_sends = 0, recvs = 0;
        for (const P2POp& op : b.ops) {
          recvs += op.type == P2POp::Type::recv ? 1 : 0;
          if (op.type != P2POp::Type::send) continue;
          (op.moves == P2PMoves::activations ? activation_sends : gradient_sends) += 1;
        }
        CHECK(activation_sends == 1);
        CHECK(gradient_sends == 1);
        CHECK(recvs == 2);
        // The compute before the group is a backward: the forward's output waited for it.
        auto i = static_cast<size_t>(b.first_instr);
        while (i > 0 && instrs[i - 1].type != Instr::Type::forward && instrs[i - 1].type != Instr::Type::backward) --i;
        REQUIRE(i > 0);
        CHECK(instrs[i - 1].type == Instr::Type::backward);
      }
    }
    CHECK(groups_of_four > 0);
  }
}

TEST_CASE("every shipped scenario's transfers run to the end; the 3D one's as its 1F1B schedule states them") {
  int pipelines = 0;
  for (const auto& path : test::shipped_scenarios()) {
    CAPTURE(path.filename().string());
    const StepPlan plan = make_step_plan(load_scenario(path.string()));
    const StepProgram program = make_step_program(plan);
    const auto batches = p2p_batches(program);
    CHECK(p2p_deadlock(program, batches).value_or("none") == "none");
    if (plan.pipeline.stages < 2) {
      CHECK(count(batches).sends == 0);
      continue;
    }
    ++pipelines;
    // llama3.1-70b-tp8-pp2 and its full_shard twin: 16 micro-batches over 2 stages; stage 0 sends 16 activations
    // and receives 16 gradients in 17 batches (the first send alone, 15 send_forward_recv_backward, the last
    // recv_backward); the 128k context-parallel one likewise with its 64 micro-batches. Context parallelism's ring
    // sends are not between stages: no batch holds them.
    const auto m = static_cast<int>(plan.pipeline.micro_batches);
    REQUIRE(batches.size() == 2);
    const Counts n = count(batches);
    CHECK(n.sends == 2 * m);
    CHECK(n.recvs == 2 * m);
    CHECK(batches[0].size() == static_cast<size_t>(m + 1));
    CHECK(batches[1].size() == static_cast<size_t>(m + 1));
  }
  CHECK(pipelines == 3);
}

TEST_CASE("1F1B's steady state sends forward and receives the gradient in one batch, its warm-up in two") {
  const StepPlan plan = plan_of("1f1b", 4, 8);
  const StepProgram program = make_step_program(plan);
  const auto batches = p2p_batches(program);
  // Stage 1 of 4: two warm-up forwards, each sent alone (send_forward) before the next receive (recv_forward).
  const auto& s1 = batches[1];
  REQUIRE(s1.size() > 3);
  CHECK(s1[0].ops.size() == 1);  // recv_forward of micro-batch 0
  CHECK(s1[0].ops[0].type == P2POp::Type::recv);
  CHECK(s1[0].ops[0].peer == 0);
  CHECK(s1[1].ops.size() == 1);  // send_forward of micro-batch 0 to stage 2
  CHECK(s1[1].ops[0].type == P2POp::Type::send);
  CHECK(s1[1].ops[0].peer == 2);
  int paired = 0;
  for (const P2PBatch& b : s1)
    if (b.ops.size() == 2) {
      CHECK(b.ops[0].type == P2POp::Type::send);
      CHECK(b.ops[1].type == P2POp::Type::recv);
      CHECK(b.ops[0].peer == b.ops[1].peer);
      CHECK(b.ops[0].moves != b.ops[1].moves);  // activations out, their gradient in (or the reverse)
      ++paired;
    }
  CHECK(paired == 2 * (8 - 2) - 1);  // each steady-state 1F1B pair but the last backward's send_backward
  for (const auto& stage : batches)
    for (const P2PBatch& b : stage)
      for (const P2POp& op : b.ops) CHECK(op.bytes == plan.pipeline.boundary_bytes);
}

TEST_CASE("a mis-ordered stage is reported as a deadlock; swapped sends as out of order") {
  StepProgram program = pipeline("1f1b", 2, 4);
  REQUIRE_FALSE(p2p_deadlock(program, p2p_batches(program)));
  SECTION("stage 0 receives micro-batch 0's gradient before it sends any activations") {
    RankProgram& s0 = program.classes[0];
    auto grad0 = std::find_if(s0.instrs.begin(), s0.instrs.end(), [](const Instr& in) {
      return in.type == Instr::Type::wait && in.event.kind == EventKind::gradient_sent;
    });
    REQUIRE(grad0 != s0.instrs.end());
    Instr moved = *grad0;
    moved.batch = 1 << 20;
    s0.instrs.erase(grad0);
    s0.instrs.insert(s0.instrs.begin() + 1, moved);  // right after step_begin
    renumber(s0);
    const auto why = p2p_deadlock(program, p2p_batches(program));
    REQUIRE(why);
    CHECK_THAT(*why, Catch::Contains("deadlock"));
    CHECK_THAT(*why, Catch::Contains("pipeline stage 0: batch 0 of"));
    CHECK_THAT(*why, Catch::Contains("recv gradient_sent[1] with stage 1"));
    CHECK_THAT(*why, Catch::Contains("pipeline stage 1: batch 0 of"));
  }
  SECTION("stage 0 sends micro-batch 1's activations before micro-batch 0's") {
    std::vector<CommCall*> sends;
    for (CommCall& c : program.classes[0].comms)
      if (c.kind == CollectiveKind::send) sends.push_back(&c);
    REQUIRE(sends.size() == 4);
    std::swap(sends[0]->delivers, sends[1]->delivers);
    const auto why = p2p_deadlock(program, p2p_batches(program));
    REQUIRE(why);
    CHECK_THAT(*why, Catch::Contains("stage 0's send #0 to stage 1 carries activation_sent[2]"));
  }
  SECTION("a batch whose instructions are not consecutive is refused") {
    for (Instr& in : program.classes[1].instrs)
      if (in.batch >= 0) in.batch = 0;
    CHECK_THROWS_WITH(p2p_batches(program), Catch::Contains("must be consecutive"));
  }
}

TEST_CASE("a tied embedding's all-reduce between the first and the last stage is a batch of its own") {
  const Scenario s = load_scenario(std::string(DPSIM_SOURCE_DIR) + "/scenarios/gpt2-1.5b-16xh100-ib.yaml",
                                   {{"parallelism.pipeline", "4"}, {"training.gradient_accumulation", "4"}});
  const StepPlan plan = make_step_plan(s);
  REQUIRE(plan.pipeline.embedding_grad_bytes > 0);
  const StepProgram program = make_step_program(plan);
  const auto batches = p2p_batches(program);
  CHECK(p2p_deadlock(program, batches).value_or("none") == "none");
  CHECK(count(batches).all_reduces == 2);
  for (int stage : {0, 3}) {
    const P2PBatch& last = batches[static_cast<size_t>(stage)].back();
    REQUIRE(last.ops.size() == 1);
    CHECK(last.ops[0].type == P2POp::Type::all_reduce);
    CHECK(last.ops[0].peer == 3 - stage);
    CHECK(last.ops[0].moves == P2PMoves::embedding_gradient);
    CHECK(last.ops[0].bytes == plan.pipeline.embedding_grad_bytes);
  }
  for (int stage : {1, 2})
    for (const P2PBatch& b : batches[static_cast<size_t>(stage)])
      for (const P2POp& op : b.ops) CHECK(op.type != P2POp::Type::all_reduce);
}
