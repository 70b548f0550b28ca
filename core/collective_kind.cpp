#include "dpsim/collective_kind.hpp"

#include <fmt/format.h>

#include "dpsim/error.hpp"

namespace dpsim {

const char* to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::send: return "send";
    case CollectiveKind::recv: return "recv";
  }
  return "?";
}

std::optional<CollectiveKind> collective_kind_named(std::string_view name) {
  for (CollectiveKind k : {CollectiveKind::all_reduce, CollectiveKind::reduce_scatter, CollectiveKind::all_gather,
                           CollectiveKind::broadcast, CollectiveKind::send, CollectiveKind::recv})
    if (name == to_string(k)) return k;
  return std::nullopt;
}

double bus_factor(CollectiveKind kind, int n) {
  if (n < 1) throw RuntimeError(fmt::format("{} over {} ranks", to_string(kind), n));
  const double ranks = n;
  switch (kind) {
    case CollectiveKind::all_reduce: return 2.0 * (ranks - 1) / ranks;
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_gather: return (ranks - 1) / ranks;
    case CollectiveKind::broadcast: return n > 1 ? 1.0 : 0.0;
    case CollectiveKind::send:
    case CollectiveKind::recv: return 1.0;
  }
  return 0;
}

double bytes_moved_per_rank(CollectiveKind kind, int n, double bytes) { return bytes * bus_factor(kind, n); }

}  // namespace dpsim
