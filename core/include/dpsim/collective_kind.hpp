#pragma once
// The collective kinds a step program calls, with nccl-tests' definitions (nccl-tests doc/PERFORMANCE.md):
// a call's `bytes` is its buffer size S as nccl-tests prints it (the full, unsharded size), algbw = S / t, and
// busbw = algbw x the kind's factor; each rank moves S x factor bytes over the bus.
#include <optional>
#include <string_view>

namespace dpsim {

enum class CollectiveKind { all_reduce, reduce_scatter, all_gather, broadcast, send, recv };
const char* to_string(CollectiveKind kind);
std::optional<CollectiveKind> collective_kind_named(std::string_view name);  // inverse of to_string

// nccl-tests' bus-bandwidth factor over n ranks: all-reduce 2(n-1)/n, reduce-scatter and all-gather (n-1)/n,
// broadcast, send and recv 1. 0 for a one-rank group of a collective (nothing moves).
double bus_factor(CollectiveKind kind, int ranks);
// Bytes each rank sends (and receives) for a call of `bytes` over `ranks`: bytes x bus_factor.
double bytes_moved_per_rank(CollectiveKind kind, int ranks, double bytes);

}  // namespace dpsim
