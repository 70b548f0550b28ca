#include "option_checks.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "dpsim/units.hpp"

namespace dpsim::app {

CLI::Validator finite_positive() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double x = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, x);
        if (ec != std::errc() || ptr != end || !std::isfinite(x) || x <= 0)
          return fmt::format("must be a finite number > 0, got \"{}\"", text);
        return "";
      },
      "NUMBER > 0");
}

CLI::Validator whole_number_in(int64_t low, int64_t high) {
  return CLI::Validator(
      [low, high](std::string& text) -> std::string {
        int64_t x = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, x);
        if (ec != std::errc() || ptr != end || x < low || x > high)
          return fmt::format("must be a whole number from {} to {}, got \"{}\"", low, high, text);
        return "";
      },
      fmt::format("INT in [{} - {}]", low, high));
}

CLI::Validator positive_size() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          if (parse_bytes(text) > 0) return "";
        } catch (const std::invalid_argument& e) {  // not a size: parse_bytes says why
          return e.what();
        }
        return fmt::format("must be above 0 bytes, got \"{}\"", text);
      },
      "SIZE > 0");
}

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& text) -> std::string { return text.empty() ? "must not be empty (give a file name)" : ""; }, "");
}

}  // namespace dpsim::app
