#include "dpsim/nccl_release.hpp"

#include <fmt/format.h>

#include <charconv>

#include "dpsim/error.hpp"

namespace dpsim {

std::optional<std::array<int, 3>> parse_nccl_release(std::string_view text) {
  std::array<int, 3> out{};
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (size_t i = 0; i < out.size(); ++i) {
    if (i > 0) {
      if (p == end || *p != '.') return std::nullopt;
      ++p;
    }
    const auto [next, ec] = std::from_chars(p, end, out[i]);
    if (ec != std::errc{} || next == p || out[i] < 0) return std::nullopt;
    p = next;
  }
  if (p != end) return std::nullopt;
  return out;
}

namespace {

std::string range_text(const NcclModel& m) {
  return fmt::format("dpsim holds NCCL tuning tables for releases {} to {} ({} releases)",
                     m.releases.empty() ? m.version : m.releases.front().name, m.version, m.file);
}

void apply(const NcclReleaseTuning& t, NcclModel& m) {
  for (const auto& [a, p, s] : t.base_latency_s) m.base_latency_s[a].at(p) = s;
  for (const auto& [f, a, p, s] : t.hw_latency_s) m.hw_latency_s[f][a].at(p) = s;
  for (const auto& [arch, bw] : t.ll_max_busbw_bytes_per_s) m.ll_max_busbw_bytes_per_s[arch] = bw;
  if (t.ll128_default_archs) m.ll128_default_archs = *t.ll128_default_archs;
  if (t.nvlstree_correction_archs) m.nvlstree_correction_archs = *t.nvlstree_correction_archs;
  m.tuning_release = t.name;
}

}  // namespace

NcclModel nccl_for_release(const NcclModel& model, const std::string& release) {
  const auto r = parse_nccl_release(release);
  if (!r) throw InputError(fmt::format("\"{}\" is not an NCCL release (major.minor.patch, e.g. 2.18.5)", release));
  const auto newest = parse_nccl_release(model.version);
  if (newest && *r > *newest)
    throw InputError(fmt::format("NCCL {} is newer than the model's nccl_version; {}", release, range_text(model)));
  const NcclReleaseTuning* table = nullptr;
  for (const NcclReleaseTuning& t : model.releases)
    if (t.release <= *r) table = &t;
  if (!model.releases.empty() && table == nullptr)
    throw InputError(fmt::format("NCCL {} is older than the oldest tuning table; {}", release, range_text(model)));
  NcclModel out = model;
  if (table != nullptr) apply(*table, out);
  return out;
}

}  // namespace dpsim
