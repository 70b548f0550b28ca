#pragma once
// Private to the reference scorer (reference.cpp: all-reduce entries and the summary; reference_ddp.cpp: DDP
// entries): what both read from an entry, and the scoring context.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "dpsim/calibration.hpp"
#include "dpsim/result.hpp"
#include "dpsim/scenario.hpp"
#include "dpsim/validation/reference.hpp"

namespace dpsim::validation::detail {

// A published number: one value, or a range the source gives ("365-370").
struct Range {
  double low = 0, high = 0;
  double mid() const { return 0.5 * (low + high); }
};
std::optional<Range> parse_published(const nlohmann::json& v);

// A key's value as text ("" when absent; non-strings as JSON).
std::string str(const nlohmann::json& j, const char* key);
// j[key], or null where j is not an object or has no such key.
const nlohmann::json& member(const nlohmann::json& j, const char* key);

// nvswitch | nvlink_mesh | pcie | multinode (InfiniBand / RoCE) | multinode_efa
std::string class_of(const Topology& t);

struct Context {
  NcclModel nccl;
  std::filesystem::path root;
  // DDP scenarios already predicted, by scenario file and overrides: a strong-scaling baseline serves five numbers,
  // and a throughput and a speedup number of one table share their 8-GPU step.
  mutable std::map<std::string, std::pair<Scenario, StepResult>> predicted;
};

// Where an entry sits in its file, so that an error can name the file, line and key path.
struct EntrySite {
  std::filesystem::path file;
  const YamlLines* lines = nullptr;
  std::string pointer;  // JSON pointer of the entry in the file ("/12")
};

// An InputError at the node `pointer` ("/12/scenario/nodes") of the site's file: its line and key path
// ("[12].scenario.nodes").
[[noreturn]] void fail_at(const EntrySite& site, const std::string& pointer, const std::string& message);

// Score the DDP numbers of one entry (its scenario.predict block); an entry without one is skipped with why.
// A malformed predict block is an InputError naming the file, line and key path.
void ddp_entry(const nlohmann::json& entry, const EntrySite& site, const Context& ctx, const ReferenceOptions& options,
               ReferenceReport& out);

// A memory_outcome entry: the configuration a source reports as having run or run out of memory, predicted; its
// memory goes to out.memory. A malformed entry is an InputError naming the file, line and key path.
void memory_entry(const nlohmann::json& entry, const EntrySite& site, const Context& ctx, ReferenceReport& out);

}  // namespace dpsim::validation::detail
