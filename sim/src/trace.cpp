#include "dpsim/sim/trace.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

namespace dpsim {

std::vector<int> trace_sample(int world, int max_ranks) {
  std::vector<int> ranks;
  if (world <= 0) return ranks;
  max_ranks = std::max(1, max_ranks);
  if (world <= max_ranks) {
    for (int r = 0; r < world; ++r) ranks.push_back(r);
    return ranks;
  }
  std::set<int> chosen{0, world - 1};
  for (int i = 1; static_cast<int>(chosen.size()) < max_ranks && i < max_ranks; ++i)
    chosen.insert(static_cast<int>(std::llround(static_cast<double>(i) * (world - 1) / (max_ranks - 1))));
  return {chosen.begin(), chosen.end()};
}

std::string trace_sample_note(int world, int max_ranks) {
  const std::vector<int> ranks = trace_sample(world, max_ranks);
  if (static_cast<int>(ranks.size()) == world) return fmt::format("all {} GPU{}", world, world == 1 ? "" : "s");
  return fmt::format(
      "GPUs {} of {} (the first, the last and evenly spaced ones between: every GPU runs the same simulated "
      "timeline)",
      fmt::join(ranks, ", "), world);
}

std::string chrome_trace_json(const StepResult& result, int max_ranks) {
  using nlohmann::json;
  const int world = result.context.value("world_size", 1);
  const int per_node = std::max(1, result.context.value("gpus_per_node", 1));
  json events = json::array();
  std::set<int> named_nodes;
  const std::vector<int> ranks = trace_sample(world, max_ranks);
  for (int rank : ranks) {
    const int node = rank / per_node, local = rank % per_node;
    if (named_nodes.insert(node).second) {
      events.push_back(
          {{"ph", "M"}, {"name", "process_name"}, {"pid", node}, {"args", {{"name", "node " + std::to_string(node)}}}});
      events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", node}, {"args", {{"sort_index", node}}}});
    }
    for (int track = 0; track < 2; ++track) {
      const int tid = local * 2 + track;
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", node},
                        {"tid", tid},
                        {"args", {{"name", "GPU " + std::to_string(rank) + (track == 0 ? " compute" : " comm")}}}});
      events.push_back(
          {{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", node}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
    }
    for (const TimelineEvent& e : result.timeline) {
      const int tid = local * 2 + (e.track == "comm" ? 1 : 0);
      events.push_back({{"ph", "X"},
                        {"name", e.name},
                        {"cat", e.track},
                        {"pid", node},
                        {"tid", tid},
                        {"ts", e.start_s * 1e6},
                        {"dur", (e.end_s - e.start_s) * 1e6}});
    }
  }
  json trace = {{"traceEvents", events},
                {"displayTimeUnit", "ms"},
                {"otherData",
                 {{"scenario", result.scenario},
                  {"mode", result.mode},
                  {"step_time_s", result.step_time_s},
                  {"world_size", world},
                  {"traced_gpus", ranks},
                  {"traced_gpus_note", trace_sample_note(world, max_ranks)}}}};
  return trace.dump();
}

}  // namespace dpsim
