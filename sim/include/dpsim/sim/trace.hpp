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

// `result.context` must hold world_size and gpus_per_node (fill_common sets them).
std::string chrome_trace_json(const StepResult& result, int max_ranks);

}  // namespace dpsim
