// The dry run of pipeline stages: every shipped scenario with parallelism.pipeline > 1, each stage walked in its own
// layout and buffers, its sends and receives launched as the step program's batches state them (p2p_batches).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../shipped_scenarios.hpp"
#include "../source_dir.hpp"
#include "dpsim/backend/executor.hpp"
#include "dpsim/backend/measure.hpp"
#include "dpsim/backend/shard_buffers.hpp"
#include "dpsim/load.hpp"
#include "dpsim/p2p_batch.hpp"
#include "dpsim/scenario.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;
using namespace dpsim::backend;

namespace {

struct Stage {
  StepLayout layout;
  ShardBuffers buffers;
  std::vector<Launch> launches;
};

Stage dry_run(const Scenario& s, const StepPlan& plan, const StepProgram& program, int stage) {
  Stage st{make_layout(plan, dtype_bytes(s.training.param_dtype), s.ddp.gradient_as_bucket_view, stage), {}, {}};
  st.buffers = plan_shard_buffers(plan, program, st.layout, 0, 0, stage);
  DryRunExecutor dry(&st.buffers);
  WalkOptions wo;
  wo.gradient_accumulation = plan.gradient_accumulation;
  wo.stage = stage;
  walk_step(plan, st.layout, wo, dry);
  st.launches = dry.launches();
  return st;
}

bool transfer(const Launch& l) { return l.type == Launch::Type::send || l.type == Launch::Type::recv; }

// What the program states for one stage: its sends (collectives with a batch) and receives (waits for another
// stage's event), in issue order, with the bytes each moves.
struct Stated {
  std::vector<std::pair<bool, dpsim::EventRef>> transfers;  // (send, what it carries)
  double send_bytes = 0, recv_bytes = 0;
};

Stated stated(const StepProgram& program, size_t c) {
  Stated s;
  const RankProgram& r = program.classes[c];
  for (const Instr& in : r.instrs) {
    if (in.type == Instr::Type::collective && in.batch >= 0) {
      const CommCall& call = r.comms[static_cast<size_t>(in.comm)];
      s.transfers.emplace_back(true, call.delivers);
      s.send_bytes += call.bytes;
    }
    if (in.type == Instr::Type::wait && crosses_classes(in.event.kind)) {
      s.transfers.emplace_back(false, in.event);
      for (const RankProgram& other : program.classes)  // the sender's call states the bytes
        for (const CommCall& call : other.comms)
          if (call.kind == CollectiveKind::send && call.delivers == in.event) s.recv_bytes += call.bytes;
    }
  }
  return s;
}

}  // namespace

TEST_CASE("every shipped pipeline scenario: each stage's dry run sends and receives what its program states") {
  int scenarios = 0;
  for (const auto& path : test::shipped_scenarios()) {
    const Scenario s = load_scenario(path);
    const StepPlan plan = make_step_plan(s);
    if (plan.pipeline.stages < 2 || plan.dims.context > 1) continue;  // measure refuses context parallelism
    INFO("scenario " << path.filename().string());
    ++scenarios;
    const StepProgram program = make_step_program(plan);
    const auto batches = p2p_batches(program);
    int64_t held = 0;
    for (size_t c = 0; c < program.classes.size(); ++c) {
      INFO("stage " << c);
      const Stage st = dry_run(s, plan, program, static_cast<int>(c));
      const Stated want = stated(program, c);
      std::vector<std::pair<bool, dpsim::EventRef>> got;
      double send_bytes = 0, recv_bytes = 0;
      int last_batch = -1;
      size_t batch_launches = 0;
      for (const Launch& l : st.launches) {
        if (!transfer(l)) continue;
        const bool send = l.type == Launch::Type::send;
        got.emplace_back(send, l.p2p.event);
        (send ? send_bytes : recv_bytes) += l.p2p.bytes;
        CHECK(l.batch >= last_batch);  // batches in the program's order
        batch_launches += l.batch != last_batch ? 1 : 0;
        last_batch = l.batch;
        CHECK(l.p2p.peer != static_cast<int>(c));
        CHECK(l.p2p.moves ==
              (l.p2p.event.kind == EventKind::gradient_sent ? P2PMoves::input_gradient : P2PMoves::activations));
        REQUIRE(l.buffers);
        CHECK(l.buffers->count * st.layout.element_bytes == static_cast<int64_t>(l.p2p.bytes));
      }
      CHECK(got == want.transfers);
      CHECK(send_bytes == want.send_bytes);
      CHECK(recv_bytes == want.recv_bytes);
      CHECK(batch_launches == batches[c].size());
      // No event crosses GPUs: the stage records and waits for none of another stage's.
      for (const Launch& l : st.launches)
        if (l.type == Launch::Type::record || l.type == Launch::Type::wait) CHECK_FALSE(crosses_classes(l.event.kind));
      // The stage holds its own gradients only, and every dW it writes is one of them.
      for (const Launch& l : st.launches)
        if (l.type == Launch::Type::gemm && l.gemm_call.role == GemmRole::backward_weight && l.gemm_call.grad >= 0)
          CHECK(st.layout.grads[static_cast<size_t>(l.gemm_call.grad)].held);
      // Its weights: flat, or (FSDP) every unit of the stage gathered and kept, with its gradients beside.
      CHECK((st.buffers.fsdp ? st.buffers.gathered_numel : st.buffers.weights_numel) >= st.layout.total_numel);
      if (st.buffers.fsdp) CHECK(st.buffers.unit_grads_numel >= st.layout.total_numel);
      CHECK(st.buffers.p2p_recv_numel * st.layout.element_bytes == static_cast<int64_t>(plan.pipeline.boundary_bytes));
      held += st.layout.total_numel;
    }
    // The stages' layouts split the whole model's.
    CHECK(held == make_layout(plan, dtype_bytes(s.training.param_dtype), s.ddp.gradient_as_bucket_view).total_numel);
  }
  CHECK(scenarios == 2);  // the 3D scenario and its FSDP twin
}

TEST_CASE("the shipped 3D scenario's dry run: 16 sends and 16 receives of 16.78 MB per stage, in 17 batches") {
  const Scenario s = load_scenario(std::string(DPSIM_SOURCE_DIR) + "/scenarios/llama3.1-70b-tp8-pp2-64xh100.yaml");
  const StepPlan plan = make_step_plan(s);
  const StepProgram program = make_step_program(plan);
  for (int stage : {0, 1}) {
    const Stage st = dry_run(s, plan, program, stage);
    int sends = 0, recvs = 0;
    for (const Launch& l : st.launches) {
      if (!transfer(l)) continue;
      (l.type == Launch::Type::send ? sends : recvs) += 1;
      CHECK(l.p2p.bytes == 16777216.0);  // 8192 tokens x 8192 hidden x 2 B / tensor 8 (sequence parallel)
      CHECK(l.p2p.peer == 1 - stage);
      CHECK(l.batch <= 16);
    }
    CHECK(sends == 16);
    CHECK(recvs == 16);
  }
  const std::string listing =
      describe_dry_run(plan, dtype_bytes(s.training.param_dtype), s.ddp.gradient_as_bucket_view);
  CHECK_THAT(listing, Catch::Contains("# pipeline stage 0 of 2"));
  CHECK_THAT(listing, Catch::Contains("# pipeline stage 1 of 2"));
  CHECK_THAT(listing, Catch::Contains("send         to stage 1 activations 16.78 MB (batch 0)"));
  CHECK_THAT(listing, Catch::Contains("recv         from stage 0 activations 16.78 MB (batch 0)"));
  CHECK_THAT(listing, Catch::Contains("# buffers of rank 0 of 4 of pipeline stage 1"));
}

TEST_CASE("a tied embedding's gradient: an all-reduce of the first and the last stage, a collective of its own") {
  const Scenario s = load_scenario(std::string(DPSIM_SOURCE_DIR) + "/scenarios/gpt2-1.5b-16xh100-ib.yaml",
                                   {{"parallelism.pipeline", "4"}, {"training.gradient_accumulation", "4"}});
  const StepPlan plan = make_step_plan(s);
  const StepProgram program = make_step_program(plan);
  for (int stage = 0; stage < 4; ++stage) {
    const Stage st = dry_run(s, plan, program, stage);
    int embedding = 0;
    for (const Launch& l : st.launches)
      if (l.type == Launch::Type::collective && l.call.group == GroupKind::embedding) {
        ++embedding;
        CHECK(l.call.bytes == plan.pipeline.embedding_grad_bytes);
      }
    CHECK(embedding == (stage == 0 || stage == 3 ? 1 : 0));
  }
}
