// Pipeline schedules: the slots each stage runs as Megatron-LM orders them (schedules.py), the activations a stage
// holds, the layer split, and the step time with its bubble (Narayanan et al. 2021, arXiv 2104.04473, Section 2.2).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "dpsim/error.hpp"
#include "dpsim/pipeline_schedule.hpp"

using namespace dpsim;

namespace {

PipelineSlot F(int micro, int chunk = 0) { return {true, micro, chunk}; }
PipelineSlot B(int micro, int chunk = 0) { return {false, micro, chunk}; }

std::string slots_text(const std::vector<PipelineSlot>& slots) {
  std::string text;
  for (const PipelineSlot& s : slots)
    text += (s.forward ? "F" : "B") + std::to_string(s.micro) + "." + std::to_string(s.chunk) + " ";
  return text;
}

const auto gpipe = PipelineSchedule::gpipe;
const auto one_f_one_b = PipelineSchedule::one_f_one_b;
const auto interleaved = PipelineSchedule::interleaved_one_f_one_b;

}  // namespace

TEST_CASE("pipeline schedule names round-trip and unknown names are refused", "[pipeline]") {
  for (PipelineSchedule s : {gpipe, one_f_one_b, interleaved}) CHECK(pipeline_schedule_named(to_string(s)) == s);
  CHECK(std::string(to_string(one_f_one_b)) == "1f1b");
  CHECK(std::string(to_string(interleaved)) == "interleaved_1f1b");
  CHECK_FALSE(pipeline_schedule_named("1F1B").has_value());
  CHECK_FALSE(pipeline_schedule_named("pipedream").has_value());
  CHECK_FALSE(pipeline_schedule_named("").has_value());
}

TEST_CASE("1F1B: p - rank - 1 warm-up forwards, then one forward and one backward, then the cool-down", "[pipeline]") {
  // forward_backward_pipelining_without_interleaving, p = 4, m = 8: stage 0 warms up with 3 forwards, stage 3 with 0.
  const auto s = pipeline_schedule(one_f_one_b, 4, 8, 1);
  REQUIRE(s.size() == 4);
  const std::vector<PipelineSlot> stage0{F(0), F(1), F(2), F(3), B(0), F(4), B(1), F(5),
                                         B(2), F(6), B(3), F(7), B(4), B(5), B(6), B(7)};
  const std::vector<PipelineSlot> stage3{F(0), B(0), F(1), B(1), F(2), B(2), F(3), B(3),
                                         F(4), B(4), F(5), B(5), F(6), B(6), F(7), B(7)};
  CHECK(slots_text(s[0]) == slots_text(stage0));
  CHECK(slots_text(s[3]) == slots_text(stage3));
  // Fewer micro-batches than stages: the warm-up is min(p - rank - 1, m), all forwards first on stage 0.
  CHECK(slots_text(pipeline_schedule(one_f_one_b, 4, 2, 1)[0]) == slots_text({F(0), F(1), B(0), B(1)}));
  CHECK(slots_text(pipeline_schedule(one_f_one_b, 1, 3, 1)[0]) == slots_text({F(0), B(0), F(1), B(1), F(2), B(2)}));
}

TEST_CASE("GPipe: every forward, then every backward, on every stage", "[pipeline]") {
  const auto s = pipeline_schedule(gpipe, 3, 4, 1);
  const std::vector<PipelineSlot> each{F(0), F(1), F(2), F(3), B(0), B(1), B(2), B(3)};
  for (const auto& stage : s) CHECK(slots_text(stage) == slots_text(each));
}

TEST_CASE("interleaved 1F1B, p = 2, v = 2, m = 4, as Megatron's schedule table orders it", "[pipeline]") {
  // get_schedule_table with groups of p = 2 micro-batches: forwards run micro-batches 0 1 0 1 2 3 2 3 on chunks
  // 0 0 1 1 0 0 1 1 (model_parallel_config.py's docstring: "rank 0 | 0 1 0 1 2 3 2 3"); backwards the same
  // micro-batches on the chunks in reverse. Warm-up (p - rank - 1) * 2 + (v - 1) * p: 4 on stage 0, 2 on stage 1.
  const auto s = pipeline_schedule(interleaved, 2, 4, 2);
  REQUIRE(s.size() == 2);
  const std::vector<PipelineSlot> stage0{F(0, 0), F(1, 0), F(0, 1), F(1, 1), F(2, 0), B(0, 1), F(3, 0), B(1, 1),
                                         F(2, 1), B(0, 0), F(3, 1), B(1, 0), B(2, 1), B(3, 1), B(2, 0), B(3, 0)};
  const std::vector<PipelineSlot> stage1{F(0, 0), F(1, 0), F(0, 1), B(0, 1), F(1, 1), B(1, 1), F(2, 0), B(0, 0),
                                         F(3, 0), B(1, 0), F(2, 1), B(2, 1), F(3, 1), B(3, 1), B(2, 0), B(3, 0)};
  CHECK(slots_text(s[0]) == slots_text(stage0));
  CHECK(slots_text(s[1]) == slots_text(stage1));
}

TEST_CASE("interleaved 1F1B with m = p runs every forward first on the first stages", "[pipeline]") {
  // get_pp_rank_microbatches: a warm-up >= m v is clamped to m v (are_all_microbatches_in_warmup). p = 4, v = 2,
  // m = 4: stage 0's warm-up 6 + 4 = 10 >= 8, stage 1's 4 + 4 = 8, stage 2's 2 + 4 = 6 < 8.
  const auto s = pipeline_schedule(interleaved, 4, 4, 2);
  auto forwards_before_first_backward = [](const std::vector<PipelineSlot>& slots) {
    int n = 0;
    while (slots[n].forward) ++n;
    return n;
  };
  CHECK(forwards_before_first_backward(s[0]) == 8);
  CHECK(forwards_before_first_backward(s[1]) == 8);
  CHECK(forwards_before_first_backward(s[2]) == 7);  // 6 warm-up, then the steady state's forward first
  CHECK(forwards_before_first_backward(s[3]) == 5);
}

TEST_CASE("activations in flight: 1F1B holds min(p, m) on stage 0, GPipe m, interleaving Megatron's penalty",
          "[pipeline]") {
  CHECK(max_in_flight(pipeline_schedule(one_f_one_b, 4, 8, 1)[0]) == 4);
  CHECK(max_in_flight(pipeline_schedule(one_f_one_b, 4, 2, 1)[0]) == 2);
  CHECK(max_in_flight(pipeline_schedule(one_f_one_b, 4, 8, 1)[3]) == 1);
  for (const auto& stage : pipeline_schedule(gpipe, 4, 8, 1)) CHECK(max_in_flight(stage) == 8);
  // Interleaved stage r holds its warm-up + 1 chunks' activations: 2(p - r - 1) + (v - 1)p + 1. On stage 0 that is
  // p + (p - 1)/v stages' worth (a chunk is 1/v of a stage), Megatron's theoretical_memory_usage.py penalty
  // "1 + (pipeline_model_parallel_size - 1) / (pipeline_model_parallel_size * virtual_pipeline_model_parallel_size)"
  // times p: p = 4, v = 2 gives 11 chunks = 5.5 stages = 4 x 1.375.
  const auto s = pipeline_schedule(interleaved, 4, 8, 2);
  for (int r = 0; r < 4; ++r) CHECK(max_in_flight(s[r]) == 2 * (4 - r - 1) + (2 - 1) * 4 + 1);
  CHECK(max_in_flight(s[0]) / 2.0 == Approx(4 * (1 + 3.0 / (4 * 2))));
  // A backward of a pair never forwarded releases nothing.
  CHECK(max_in_flight({B(0), F(1), F(2), B(1)}) == 2);
}

TEST_CASE("activation bytes held: each chunk's own bytes, the last chunk's (the logits) held once at a time",
          "[pipeline]") {
  const auto s = pipeline_schedule(interleaved, 4, 8, 2);
  // Equal chunks: the count of pairs held x one chunk's bytes.
  for (int r = 0; r < 4; ++r) CHECK(peak_held_bytes(s[r], {3.0, 3.0}) == Approx(3.0 * max_in_flight(s[r])));
  // The last stage runs its (v - 1)p = 4 warm-up forwards through chunk 0, then each chunk-1 forward (the output
  // layer and the loss) is followed by its own backward: at most 4 chunk-0 pairs and one chunk-1 pair are held, not
  // 5 pairs of the heavier chunk.
  CHECK(peak_held_bytes(s[3], {1.0, 10.0}) == Approx(4 * 1.0 + 10.0));
  CHECK(peak_held_bytes(s[3], {1.0, 10.0}) < max_in_flight(s[3]) * 10.0);
  // Plain 1F1B has one chunk: its peak is the count x that chunk.
  CHECK(peak_held_bytes(pipeline_schedule(one_f_one_b, 4, 8, 1)[0], {2.5}) == Approx(4 * 2.5));
  // A backward of a pair never forwarded releases nothing.
  CHECK(peak_held_bytes({B(0), F(1), F(2), B(1)}, {2.0}) == Approx(4.0));
}

TEST_CASE("step time: GPipe and 1F1B take (m + p - 1)(f + b), interleaving (m + (p - 1)/v)(f + b)", "[pipeline]") {
  const double f = 1.25, b = 2.5;  // a whole stage's forward and backward of one micro-batch
  for (int p : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, 4, 8, 12, 16}) {
      INFO("p = " << p << ", m = " << m);
      const double pipelined = (m + p - 1) * (f + b);
      CHECK(ideal_step_time(pipeline_schedule(gpipe, p, m, 1), f, b, 0) == Approx(pipelined));
      CHECK(ideal_step_time(pipeline_schedule(one_f_one_b, p, m, 1), f, b, 0) == Approx(pipelined));
      for (int v : {2, 3, 4}) {
        if (p < 2 || m % p != 0) continue;
        INFO("v = " << v);
        // A chunk is 1/v of the stage's layers: its passes take f/v and b/v. Bubble fraction (p - 1)/(v m).
        const double step = ideal_step_time(pipeline_schedule(interleaved, p, m, v), f / v, b / v, 0);
        CHECK(step == Approx((m + double(p - 1) / v) * (f + b)));
        CHECK((step - m * (f + b)) / (m * (f + b)) == Approx(double(p - 1) / (v * m)));
      }
    }
}

TEST_CASE("step time pays each send between stages on the critical path", "[pipeline]") {
  // One micro-batch through p = 2 stages: F on 0, send, F on 1, B on 1, send, B on 0.
  CHECK(ideal_step_time(pipeline_schedule(one_f_one_b, 2, 1, 1), 1.0, 2.0, 0.5) == Approx(2 * 1.0 + 2 * 2.0 + 2 * 0.5));
  // p = 4, m = 1: 2(p - 1) sends.
  CHECK(ideal_step_time(pipeline_schedule(gpipe, 4, 1, 1), 1.0, 2.0, 0.25) == Approx(4 * 3.0 + 6 * 0.25));
  // A stage with one chunk-to-chunk hop on the same GPU pays no send (p = 1 with two chunks, built by hand).
  CHECK(ideal_step_time({{F(0, 0), F(0, 1), B(0, 1), B(0, 0)}}, 1.0, 2.0, 5.0) == Approx(6.0));
}

TEST_CASE("step time refuses slot lists that are incomplete or cannot run in their order", "[pipeline]") {
  // Stage 0 runs micro-batch 1 first and then waits for its backward, which stage 1 can only run after micro-batch
  // 0, whose forward stage 0 has not run.
  CHECK_THROWS_WITH(ideal_step_time({{F(1), B(1), F(0), B(0)}, {F(0), B(0), F(1), B(1)}}, 1, 2, 0),
                    Catch::Contains("deadlocks: stage 0 waits at slot 1 (backward of micro-batch 1, chunk 0)"));
  CHECK_THROWS_WITH(ideal_step_time({{F(0), F(1), B(0)}}, 1, 2, 0),
                    Catch::Contains("pipeline stage 0: 2 forwards and 1 backwards"));
  CHECK_THROWS_WITH(ideal_step_time({{B(0), F(0)}}, 1, 2, 0), Catch::Contains("before its forward"));
  CHECK_THROWS_WITH(ideal_step_time({{F(0), F(0), B(0)}}, 1, 2, 0), Catch::Contains("repeats the forward"));
  CHECK_THROWS_WITH(ideal_step_time({}, 1, 2, 0), Catch::Contains("at least one stage"));
  CHECK_THROWS_WITH(ideal_step_time({{F(0), B(0)}}, -1, 2, 0), Catch::Contains("forward_s must be a finite time"));
}

TEST_CASE("every schedule Megatron accepts runs in its order on every stage", "[pipeline]") {
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 13; ++m)
      for (int v = 1; v <= 3; ++v)
        for (PipelineSchedule s : {gpipe, one_f_one_b, interleaved}) {
          const bool valid = s == interleaved ? p >= 2 && v >= 2 && m % p == 0 : v == 1;
          INFO(to_string(s) << " p = " << p << ", m = " << m << ", v = " << v);
          if (!valid) {
            CHECK_THROWS_AS(pipeline_schedule(s, p, m, v), InputError);
            continue;
          }
          const auto slots = pipeline_schedule(s, p, m, v);
          CHECK_NOTHROW(ideal_step_time(slots, 1.0, 2.0, 0.1));
          for (const auto& stage : slots) CHECK(stage.size() == size_t(2 * m * v));
        }
}

TEST_CASE("invalid pipeline schedules are refused with the rule they break", "[pipeline]") {
  CHECK_THROWS_WITH(pipeline_schedule(one_f_one_b, 0, 4, 1), Catch::Contains("pipeline stages must be >= 1, got 0"));
  CHECK_THROWS_WITH(pipeline_schedule(one_f_one_b, 2, 0, 1), Catch::Contains("micro-batches per step must be >= 1"));
  CHECK_THROWS_WITH(pipeline_schedule(gpipe, 2, 4, 0), Catch::Contains("virtual_stages must be >= 1, got 0"));
  CHECK_THROWS_WITH(pipeline_schedule(one_f_one_b, 2, 4, 2),
                    Catch::Contains("virtual_stages 2 needs schedule interleaved_1f1b (1f1b runs one model chunk"));
  CHECK_THROWS_WITH(pipeline_schedule(gpipe, 2, 4, 3), Catch::Contains("(gpipe runs one model chunk"));
  CHECK_THROWS_WITH(pipeline_schedule(interleaved, 4, 6, 2),
                    Catch::Contains("micro-batches per step (6) to be a multiple of the pipeline stages (4)"));
  CHECK_THROWS_WITH(pipeline_schedule(interleaved, 4, 2, 2),
                    Catch::Contains("at least as many micro-batches per step as pipeline stages, got 2"));
  CHECK_THROWS_WITH(pipeline_schedule(interleaved, 1, 4, 2), Catch::Contains("at least 2 pipeline stages, got 1"));
  CHECK_THROWS_WITH(pipeline_schedule(interleaved, 2, 4, 1), Catch::Contains("needs virtual_stages >= 2, got 1"));
  CHECK_THROWS_WITH(pipeline_schedule(one_f_one_b, 2, 1 << 30, 1), Catch::Contains("too many compute slots"));
}

TEST_CASE("layers split over virtual stages in Megatron's model order", "[pipeline]") {
  // get_num_layers_to_build: num_layers / p per stage, / v per chunk.
  CHECK(split_layers(32, 4, 1, {}) == std::vector<int>{8, 8, 8, 8});
  CHECK(split_layers(8, 2, 2, {}) == std::vector<int>(4, 2));
  // Chunk c of stage r is virtual stage c p + r: transformer_block.py's example, 8 layers, 2 stages, 2 chunks,
  // "Stage 0: [0, 1] [4, 5]; Stage 1: [2, 3] [6, 7]": stage 0's second chunk comes after stage 1's first.
  CHECK(virtual_stage(0, 0, 2) == 0);
  CHECK(virtual_stage(1, 0, 2) == 1);
  CHECK(virtual_stage(0, 1, 2) == 2);
  CHECK(virtual_stage(1, 1, 2) == 3);
  const std::vector<int> uneven{3, 2, 2, 1};
  CHECK(split_layers(8, 2, 2, uneven) == uneven);
}

TEST_CASE("layer splits that do not fit the model are refused", "[pipeline]") {
  CHECK_THROWS_WITH(split_layers(30, 4, 1, {}),
                    Catch::Contains("30 layers do not split evenly over 4 pipeline stages"));
  CHECK_THROWS_WITH(split_layers(8, 2, 3, {}),
                    Catch::Contains("4 layers per pipeline stage do not split evenly over 3 virtual stages"));
  CHECK_THROWS_WITH(split_layers(8, 2, 2, {4, 4}), Catch::Contains("has 2 entries; 2 pipeline stages x 2 virtual"));
  CHECK_THROWS_WITH(split_layers(8, 2, 1, {8, 0}), Catch::Contains("virtual stage 1 0 layers; each needs at least 1"));
  CHECK_THROWS_WITH(split_layers(8, 2, 1, {4, 5}), Catch::Contains("adds up to 9 layers; the model has 8"));
  CHECK_THROWS_WITH(split_layers(0, 1, 1, {}), Catch::Contains("at least 1 layer"));
  CHECK_THROWS_WITH(split_layers(8, 0, 1, {}), Catch::Contains("pipeline stages must be >= 1"));
}
