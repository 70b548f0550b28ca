#include "fluid.hpp"

#include <algorithm>
#include <limits>
#include <queue>
#include <utility>

#include "dpsim/error.hpp"

namespace dpsim::sim {

namespace {

// A flow counts as done once what it has left is below this fraction of its bytes (float residue of the
// rate x time updates); SimGrid rounds remaining work the same way (its precision/work-amount).
constexpr double kDoneFraction = 1e-9;

struct Solver {
  const std::vector<FluidFlow>& flows;
  const std::vector<double>& capacity;
  std::vector<std::vector<int>> on_link;  // link -> flows through it
  std::vector<double> left, rate;
  std::vector<char> active;

  Solver(const std::vector<FluidFlow>& f, const std::vector<double>& c)
      : flows(f), capacity(c), on_link(c.size()), left(f.size()), rate(f.size()), active(f.size()) {
    for (size_t i = 0; i < flows.size(); ++i) {
      left[i] = flows[i].bytes;
      active[i] = flows[i].bytes > 0 && !flows[i].links.empty();
      for (int l : flows[i].links) {
        if (l < 0 || static_cast<size_t>(l) >= capacity.size() || !(capacity[static_cast<size_t>(l)] > 0))
          throw RuntimeError("simulator: a fluid flow crosses a link without capacity");
        if (active[i]) on_link[static_cast<size_t>(l)].push_back(static_cast<int>(i));
      }
    }
  }

  // Progressive filling: the link with the smallest fair share fixes the rate of its unfixed flows; repeat.
  void share() {
    std::vector<double> spare(capacity);
    std::vector<int> unfixed(capacity.size(), 0);
    std::vector<char> fixed(flows.size(), 0);
    using Entry = std::pair<double, int>;  // (fair share, link)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> by_share;
    for (size_t l = 0; l < capacity.size(); ++l) {
      for (int f : on_link[l]) unfixed[l] += active[static_cast<size_t>(f)];
      if (unfixed[l] > 0) by_share.push({spare[l] / unfixed[l], static_cast<int>(l)});
    }
    while (!by_share.empty()) {
      const auto [fair, l] = by_share.top();
      by_share.pop();
      const auto link = static_cast<size_t>(l);
      if (unfixed[link] == 0 || fair != spare[link] / unfixed[link]) continue;  // stale entry
      for (int f : on_link[link]) {
        const auto flow = static_cast<size_t>(f);
        if (!active[flow] || fixed[flow]) continue;
        fixed[flow] = 1;
        rate[flow] = fair;
        for (int m : flows[flow].links) {
          const auto other = static_cast<size_t>(m);
          spare[other] = std::max(0.0, spare[other] - fair);
          if (--unfixed[other] > 0 && other != link) by_share.push({spare[other] / unfixed[other], m});
        }
      }
    }
  }

  // Advances to the next completion; false when every flow is done.
  bool advance(double& clock) {
    double dt = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < flows.size(); ++i)
      if (active[i]) dt = std::min(dt, left[i] / rate[i]);
    if (dt == std::numeric_limits<double>::infinity()) {
      if (std::find(active.begin(), active.end(), 1) != active.end())
        throw RuntimeError("simulator: a fluid flow got no bandwidth");
      return false;
    }
    clock += dt;
    for (size_t i = 0; i < flows.size(); ++i) {
      if (!active[i]) continue;
      left[i] -= rate[i] * dt;
      if (left[i] <= kDoneFraction * flows[i].bytes) active[i] = 0;
    }
    return true;
  }
};

}  // namespace

double fluid_makespan_s(const std::vector<FluidFlow>& flows, const std::vector<double>& capacity_bytes_per_s) {
  Solver s(flows, capacity_bytes_per_s);
  double clock = 0;
  for (;;) {
    s.share();
    if (!s.advance(clock)) return clock;
  }
}

}  // namespace dpsim::sim
