// ideal_step_time: a pipeline schedule's step time with uniform pass times, by running its dependency graph (the
// reference the simulator's pipeline is checked against). With no send time it reproduces Narayanan et al. 2021
// (arXiv 2104.04473) Section 2.2: GPipe and 1F1B take (m + p - 1)(t_f + t_b) for p stages and m micro-batches
// (bubble fraction (p - 1)/m), interleaving with v chunks (m + (p - 1)/v)(t_f + t_b) (bubble (p - 1)/(v m)),
// where t_f and t_b are a whole stage's times and a chunk's are t_f/v and t_b/v.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "dpsim/error.hpp"
#include "dpsim/pipeline_schedule.hpp"

namespace dpsim {

namespace {

std::string describe(const PipelineSlot& s) {
  return fmt::format("{} of micro-batch {}, chunk {}", s.forward ? "forward" : "backward", s.micro, s.chunk);
}

struct Shape {
  int stages = 0;
  int micro_batches = 0;
  int chunks = 0;
  int virtual_stages() const { return stages * chunks; }
};

Shape shape_of(const std::vector<std::vector<PipelineSlot>>& schedule) {
  if (schedule.empty()) throw InputError("a pipeline schedule needs at least one stage");
  Shape shape{static_cast<int>(schedule.size()), 0, 0};
  for (size_t r = 0; r < schedule.size(); ++r)
    for (const PipelineSlot& s : schedule[r]) {
      if (s.micro < 0 || s.chunk < 0)
        throw InputError(fmt::format("pipeline stage {}: {} has a negative index", r, describe(s)));
      shape.micro_batches = std::max(shape.micro_batches, s.micro + 1);
      shape.chunks = std::max(shape.chunks, s.chunk + 1);
    }
  if (shape.micro_batches == 0) throw InputError("a pipeline schedule needs at least one slot");
  return shape;
}

// Each stage forwards every (micro-batch, chunk) once and backwards it once, after its forward.
void check_complete(const std::vector<PipelineSlot>& slots, int stage, const Shape& shape) {
  std::set<std::pair<int, int>> forwarded;
  std::set<std::pair<int, int>> backwarded;
  for (size_t i = 0; i < slots.size(); ++i) {
    const PipelineSlot& s = slots[i];
    const std::pair<int, int> key{s.micro, s.chunk};
    const bool repeated = s.forward ? !forwarded.insert(key).second : !backwarded.insert(key).second;
    if (repeated) throw InputError(fmt::format("pipeline stage {}: slot {} repeats the {}", stage, i, describe(s)));
    if (!s.forward && !forwarded.contains(key))
      throw InputError(fmt::format("pipeline stage {}: slot {} runs the {} before its forward", stage, i, describe(s)));
  }
  const size_t want = static_cast<size_t>(shape.micro_batches) * shape.chunks;
  if (forwarded.size() != want || backwarded.size() != want)
    throw InputError(
        fmt::format("pipeline stage {}: {} forwards and {} backwards; {} micro-batches x {} chunks need "
                    "{} of each",
                    stage, forwarded.size(), backwarded.size(), shape.micro_batches, shape.chunks, want));
}

void check_time(double seconds, const char* what) {
  if (!std::isfinite(seconds) || seconds < 0)
    throw InputError(fmt::format("{} must be a finite time >= 0, got {}", what, seconds));
}

// End times of every pass, indexed by (micro-batch, virtual stage); NaN until it has run.
class PassClock {
 public:
  explicit PassClock(const Shape& shape)
      : shape_(shape),
        forward_(static_cast<size_t>(shape.micro_batches) * shape.virtual_stages(), kNotRun),
        backward_(forward_.size(), kNotRun) {}
  double& end(bool forward, int micro, int vstage) {
    return (forward ? forward_ : backward_)[static_cast<size_t>(micro) * shape_.virtual_stages() + vstage];
  }
  static bool ran(double end_s) { return !std::isnan(end_s); }

 private:
  static constexpr double kNotRun = std::numeric_limits<double>::quiet_NaN();
  Shape shape_;
  std::vector<double> forward_;
  std::vector<double> backward_;
};

// The pass another stage hands this slot (its input activation or output gradient), if any: the forward on virtual
// stage k-1, the backward on k+1. Its result arrives p2p_s after it ends when it ran on another stage.
struct Upstream {
  bool exists = false;
  int vstage = 0;
};

Upstream upstream_of(const PipelineSlot& s, int vstage, const Shape& shape) {
  if (s.forward) return {vstage > 0, vstage - 1};
  return {vstage < shape.virtual_stages() - 1, vstage + 1};
}

}  // namespace

double ideal_step_time(const std::vector<std::vector<PipelineSlot>>& schedule, double forward_s, double backward_s,
                       double p2p_s) {
  check_time(forward_s, "forward_s");
  check_time(backward_s, "backward_s");
  check_time(p2p_s, "p2p_s");
  const Shape shape = shape_of(schedule);
  for (int r = 0; r < shape.stages; ++r) check_complete(schedule[r], r, shape);

  PassClock clock(shape);
  std::vector<size_t> next(shape.stages, 0);
  std::vector<double> free_s(shape.stages, 0.0);
  size_t left = 0;
  for (const auto& slots : schedule) left += slots.size();
  // Each round runs, on every stage in turn, the slots whose inputs have arrived; a round that runs none while
  // slots are left is a deadlock. Start times do not depend on the round a slot runs in, only on its inputs.
  for (bool progress = true; progress && left > 0;) {
    progress = false;
    for (int r = 0; r < shape.stages; ++r) {
      for (; next[r] < schedule[r].size(); ++next[r], --left, progress = true) {
        const PipelineSlot& s = schedule[r][next[r]];
        const int vstage = virtual_stage(r, s.chunk, shape.stages);
        const Upstream up = upstream_of(s, vstage, shape);
        double start_s = free_s[r];
        if (up.exists) {
          const double input_end_s = clock.end(s.forward, s.micro, up.vstage);
          if (!PassClock::ran(input_end_s)) break;
          const bool other_stage = up.vstage % shape.stages != r;
          start_s = std::max(start_s, input_end_s + (other_stage ? p2p_s : 0.0));
        }
        // A backward also follows its own forward, which check_complete put earlier on this stage.
        free_s[r] = start_s + (s.forward ? forward_s : backward_s);
        clock.end(s.forward, s.micro, vstage) = free_s[r];
      }
    }
  }
  for (int r = 0; r < shape.stages; ++r)
    if (next[r] < schedule[r].size())
      throw InputError(
          fmt::format("the pipeline schedule deadlocks: stage {} waits at slot {} ({}) for an input "
                      "no stage can produce in the given order",
                      r, next[r], describe(schedule[r][next[r]])));
  return *std::max_element(free_s.begin(), free_s.end());
}

}  // namespace dpsim
