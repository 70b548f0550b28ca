#pragma once
// Flows started together on fixed routes, shared max-min fairly (every flow on a link gets an equal share of what
// the flows bottlenecked elsewhere leave), run until the last one ends. This is the sharing SimGrid's CM02 model
// solves with cross-traffic off and no TCP window (docs/simulator.md), computed here without the engine: SimGrid
// 3.32 scans a list of every pending host-to-host comm at each completion (CommImpl::finish), so F flows started
// at once cost O(F^2) there, minutes at the 10^5-10^6 flows of a 2^17-2^20-GPU pattern.
#include <vector>

namespace dpsim::sim {

struct FluidFlow {
  double bytes = 0;
  std::vector<int> links;  // indices into the capacities; a link at most once
};

// Seconds from the common start until the last flow has moved its bytes. `capacity_bytes_per_s[l]` > 0.
// Flows of no bytes, or with no link, take no time.
double fluid_makespan_s(const std::vector<FluidFlow>& flows, const std::vector<double>& capacity_bytes_per_s);

}  // namespace dpsim::sim
