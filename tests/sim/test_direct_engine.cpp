// The direct engine (sim/src/direct.hpp) runs the step program's stream coroutines without SimGrid's engine where no
// call lays flows. Its primitives behave as SimGrid's do, and on every shipped scenario, and on sweep-like variants of
// them, it gives the result SimGrid's engine gives: every figure, call and bucket within 1e-9, the same timeline.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../shipped_scenarios.hpp"
#include "direct.hpp"
#include "dpsim/error.hpp"
#include "dpsim/load.hpp"
#include "dpsim/sim/simulate.hpp"
#include "dpsim/sweep_spec.hpp"

using namespace dpsim;
using namespace dpsim::sim;

namespace {

Task op(DirectEngine& e, int host, double ops, std::vector<double>& ends) {
  co_await e.compute(host, ops);
  ends.push_back(e.now());
}

Task slow_down_at(DirectEngine& e, double at, int host) {
  co_await e.sleep(at);
  e.set_pstate(host, 1);
}

Task take(DirectEngine& e, Semaphore& s, int id, std::vector<int>& order) {
  co_await e.acquire(s);
  order.push_back(id);
}

Task give_at(DirectEngine& e, Semaphore& s, double at, int units) {
  co_await e.sleep(at);
  for (int i = 0; i < units; ++i) e.release(s);
}

Task fail_at(DirectEngine& e, double at) {
  co_await e.sleep(at);
  throw std::runtime_error("from the program");
}

// The first difference between two JSON values ("" if none): every number within `rel` (relative), strings and keys
// equal; the engine's name aside.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path, double rel) {
  if (a.is_object() != b.is_object() || a.is_array() != b.is_array() || a.size() != b.size())
    return path + ": " + a.dump().substr(0, 80) + " vs " + b.dump().substr(0, 80);
  if (a.is_object()) {
    for (const auto& [k, v] : a.items()) {
      if (path == "/context/simulator" && k == "engine") continue;
      if (!b.contains(k)) return path + "/" + k + ": missing";
      if (auto d = first_difference(v, b.at(k), path + "/" + k, rel); !d.empty()) return d;
    }
    return "";
  }
  if (a.is_array()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (auto d = first_difference(a[i], b[i], path + "/" + std::to_string(i), rel); !d.empty()) return d;
    return "";
  }
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    if (std::abs(x - y) <= rel * std::max(std::abs(x), std::abs(y)) + 1e-15) return "";
    return path + ": " + a.dump() + " vs " + b.dump();
  }
  return a == b ? "" : path + ": " + a.dump() + " vs " + b.dump();
}

bool close(double x, double y) { return std::abs(x - y) <= 1e-9 * std::max(std::abs(x), std::abs(y)) + 1e-12; }

// The first timeline event the two runs disagree on ("" if none).
std::string timeline_difference(const std::vector<TimelineEvent>& d, const std::vector<TimelineEvent>& g) {
  if (d.size() != g.size()) return "timeline sizes " + std::to_string(d.size()) + " vs " + std::to_string(g.size());
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i].name != g[i].name || d[i].track != g[i].track || !close(d[i].start_s, g[i].start_s) ||
        !close(d[i].end_s, g[i].end_s))
      return "timeline event " + std::to_string(i) + " " + d[i].name;
  return "";
}

// Whether the direct engine ran `s`, checked against SimGrid's engine (where it does not run, there is nothing to
// compare).
bool check_engines_agree(const Scenario& s) {
  const StepPlan plan = make_step_plan(s);
  SimOptions o;
  o.progress = false;
  const StepResult direct = simulate(s, plan, o);
  if (direct.context.at("simulator").at("engine").get<std::string>().rfind("dpsim direct", 0) != 0) return false;
  o.direct_engine = false;
  const StepResult simgrid = simulate(s, plan, o);
  INFO(s.name);
  CHECK(first_difference(to_json(simgrid), to_json(direct), "", 1e-9) == "");
  CHECK(timeline_difference(direct.timeline, simgrid.timeline) == "");
  return true;
}

}  // namespace

TEST_CASE("direct engine: an op slows from the moment a collective starts beside it, as a SimGrid pstate does") {
  DirectEngine e({{1e9, 0.5e9}});
  std::vector<double> ends;
  std::vector<Task> tasks;
  tasks.push_back(op(e, 0, 1e9, ends));  // 1 s alone
  tasks.push_back(slow_down_at(e, 0.25, 0));
  e.run(tasks);
  REQUIRE(ends.size() == 1);
  CHECK(ends[0] == Approx(0.25 + 0.75 * 2));  // the rest at half speed
}

TEST_CASE("direct engine: a release wakes the longest waiter; a unit released first is taken at once") {
  DirectEngine e({{1e9, 1e9}});
  Semaphore s;
  std::vector<int> order;
  std::vector<Task> tasks;
  for (int id = 0; id < 3; ++id) tasks.push_back(take(e, s, id, order));
  tasks.push_back(give_at(e, s, 1.0, 3));
  e.run(tasks);
  CHECK(order == std::vector<int>{0, 1, 2});
  CHECK(e.now() == 1.0);

  DirectEngine early({{1e9, 1e9}});
  Semaphore t;
  early.release(t);
  std::vector<int> got;
  std::vector<Task> one;
  one.push_back(take(early, t, 7, got));
  early.run(one);
  CHECK(got == std::vector<int>{7});
  CHECK(early.now() == 0);
}

TEST_CASE("direct engine: a stream left waiting is an error, and so is what a stream throws") {
  DirectEngine e({{1e9, 1e9}});
  Semaphore never;
  std::vector<int> order;
  std::vector<Task> tasks;
  tasks.push_back(take(e, never, 0, order));
  CHECK_THROWS_WITH(e.run(tasks), Catch::Contains("a stream waiting for an event no stream records"));

  DirectEngine f({{1e9, 1e9}});
  std::vector<Task> failing;
  failing.push_back(fail_at(f, 0.5));
  CHECK_THROWS_WITH(f.run(failing), "from the program");
}

TEST_CASE("the direct engine and SimGrid's give the same step on every shipped scenario") {
  const auto files = test::shipped_scenarios();
  size_t direct = 0;
  for (const auto& file : files) direct += check_engines_agree(load_scenario(file));
  // All but two whose calls lay flows: the 512-GPU Megatron step's data-parallel calls, and the 128k context-parallel
  // step's data groups (data x context, two GPUs of a node) beside its tensor groups on the same NVLinks.
  CHECK(direct >= files.size() - 2);
}

TEST_CASE("the direct engine and SimGrid's give the same step on every scenario of the reference set", "[reference]") {
  size_t files = 0, direct = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::filesystem::path(DPSIM_SOURCE_DIR) /
                                                                     "validation/reference/scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    const Scenario s = load_scenario(e.path());
    if (s.world_size() > 512) continue;  // SimGrid's engine takes minutes on the largest 3D steps
    ++files;
    direct += check_engines_agree(s);
  }
  CHECK(files > 60);
  CHECK(direct > files / 2);
}

TEST_CASE("the direct engine and SimGrid's agree on the variants a sweep and the advice run") {
  const std::vector<std::vector<Override>> variants = {
      {{"training.micro_batch", "3"}, {"ddp.bucket_cap", "5MiB"}},
      {{"cluster.nic_bandwidth", "100Gbps"}, {"ddp.bucket_cap", "200MiB"}},
      {{"cluster.nodes", "2"}, {"training.gradient_accumulation", "4"}},
  };
  size_t runs = 0, direct = 0;
  for (const char* name : {"gpt2-1.5b-16xh100-ib", "llama3.1-70b-hsdp-64xh100", "llama3.1-70b-tp8-pp2-64xh100"})
    for (const auto& set : variants) {
      const auto path = std::filesystem::path(DPSIM_SOURCE_DIR) / "scenarios" / (std::string(name) + ".yaml");
      INFO(name);
      direct += check_engines_agree(load_scenario(path, set));
      ++runs;
    }
  CHECK(direct == runs);
}
