#include "dpsim/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

namespace dpsim {

namespace {

constexpr size_t kMaxEdits = 3;
constexpr size_t kMaxSuggestions = 3;

size_t levenshtein(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

bool is_separator(char c) { return c == '-' || c == '_' || c == '.' || c == ' '; }

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Lower-case parts between separators, sorted: "A100-SXM_80GB" -> {"80gb", "a100", "sxm"}.
std::vector<std::string> parts(const std::string& name) {
  std::vector<std::string> out{""};
  for (const char c : name) {
    if (!is_separator(c))
      out.back() += lower(c);
    else if (!out.back().empty())
      out.emplace_back();
  }
  if (out.back().empty()) out.pop_back();
  std::sort(out.begin(), out.end());
  return out;
}

// Lower-case, `sep` between parts: ("A100-SXM_80GB", "-") -> "a100-sxm-80gb"; ("RTX-4090", "") -> "rtx4090".
std::string normalized(const std::string& name, const std::string& sep) {
  std::string out;
  for (const char c : name) {
    if (is_separator(c))
      out += sep;
    else
      out += lower(c);
  }
  return out;
}

std::string joined(const std::vector<std::string>& p) {
  std::string out;
  for (const auto& s : p) out += (out.empty() ? "" : "-") + s;
  return out;
}

bool contains_all(const std::vector<std::string>& big, const std::vector<std::string>& small) {
  return !small.empty() && std::includes(big.begin(), big.end(), small.begin(), small.end());
}

// (rank, distance) of `candidate` as a guess for `word`; rank 3: not close.
std::pair<int, size_t> closeness(const std::string& word, const std::string& candidate) {
  const auto w = parts(word), c = parts(candidate);
  if (w == c || normalized(word, "") == normalized(candidate, "")) return {0, 0};
  // A candidate of one part inside a longer word is left to the edit distance: "gemm_eficiency" means
  // "gemm_efficiency", not "gemm".
  if (contains_all(c, w) || (c.size() > 1 && contains_all(w, c)))
    return {1, std::max(c.size(), w.size()) - std::min(c.size(), w.size())};
  const size_t edits =
      std::min(levenshtein(normalized(word, "-"), normalized(candidate, "-")), levenshtein(joined(w), joined(c)));
  return edits <= kMaxEdits ? std::pair<int, size_t>{2, edits} : std::pair<int, size_t>{3, 0};
}

}  // namespace

std::vector<std::string> close_names(const std::string& word, const std::vector<std::string>& candidates) {
  std::pair<int, size_t> best{3, 0};
  std::vector<std::string> out;
  for (const auto& c : candidates) {
    if (c == word) continue;
    const auto score = closeness(word, c);
    if (score.first == 3 || score > best) continue;
    if (score < best) out.clear();
    best = score;
    if (out.size() < kMaxSuggestions) out.push_back(c);
  }
  return out;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const auto names = close_names(word, candidates);
  if (names.empty()) return "";
  std::string out = " (did you mean";
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? " \"" : i + 1 == names.size() ? " or \"" : ", \"") + names[i] + "\"";
  return out + "?)";
}

}  // namespace dpsim
