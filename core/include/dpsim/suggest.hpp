#pragma once
// Did-you-mean for a name looked up in a list (a YAML key, a GPU in data/gpus.yaml, a shipped topology).
#include <string>
#include <vector>

namespace dpsim {

// The candidates a mistyped `word` most likely meant, best first (at most 3; empty when none is close). Closest:
// the same name up to case and separators (- _ . space) or with its parts in another order ("a100-80gb-sxm" for
// "A100-SXM-80GB"); then a name whose parts contain the word's ("A100" for every A100), or of two parts or more
// that are all in the word's ("H100-SXM" for "H100-SXM-80GB"); then a name within 3 edits ("H100-SXN" for "H100-SXM").
// Ties keep the candidates' order.
std::vector<std::string> close_names(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean \"a\"?)", " (did you mean \"a\" or \"b\"?)", or "" when no candidate is close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace dpsim
