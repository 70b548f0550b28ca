#include "dpsim/hash.hpp"

#include <cstdint>

#include <fmt/format.h>

namespace dpsim {

std::string fnv1a64(std::string_view text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64-bit offset basis and prime (Fowler, Noll, Vo)
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return fmt::format("fnv1a64:{:016x}", h);
}

}  // namespace dpsim
