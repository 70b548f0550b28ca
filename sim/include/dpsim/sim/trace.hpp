#pragma once
// Chrome trace (JSON, opens in Perfetto / chrome://tracing): one process per node, a compute and a
// communication track per GPU. The simulated ranks are identical (data parallel on a symmetric
// platform), so every sampled GPU shows rank 0's timeline.
#include <string>
#include <vector>

#include "dpsim/result.hpp"

namespace dpsim {

// At most `max_ranks` GPUs: all of them when the world is that small, else first, last and evenly spaced ones.
std::vector<int> trace_sample(int world, int max_ranks);

// Which GPUs trace_sample keeps and why, for a person: "GPUs 0, 2, 4, 6, 9, 11, 13, 15 of 16 (the first, the last
// and evenly spaced ones between: every GPU runs the same simulated timeline)".
std::string trace_sample_note(int world, int max_ranks);

// `result.context` must hold world_size and gpus_per_node (fill_common sets them).
std::string chrome_trace_json(const StepResult& result, int max_ranks);

}  // namespace dpsim
