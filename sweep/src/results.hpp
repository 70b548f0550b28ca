#pragma once
// The results files of a sweep directory, shared by the runner and the MPI ranks' merge.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "dpsim/sweep_spec.hpp"

namespace dpsim {

// The JSON lines of a results.jsonl text by point; a line cut by a crash is dropped (that point runs again).
std::map<int64_t, std::string> parse_results(const std::string& jsonl_text);

// The same, read from a results.jsonl file (none: no lines).
std::map<int64_t, std::string> read_results(const std::filesystem::path& jsonl);

// Writes DIR/results.jsonl and DIR/results.csv (each atomically) holding `lines` in point order.
void write_results(const SweepSpec& sweep, const std::filesystem::path& dir,
                   const std::map<int64_t, std::string>& lines);

}  // namespace dpsim
