#include "dpsim/error.hpp"

#include <fmt/format.h>

namespace dpsim {

namespace {
std::string located(const std::string& file, int line, const std::string& key_path, const std::string& message) {
  std::string where = file;
  if (line > 0) where += fmt::format(":{}", line);
  if (!key_path.empty()) where += fmt::format(": {}", key_path);
  return where.empty() ? message : where + ": " + message;
}
}  // namespace

InputError::InputError(const std::string& file, int line, const std::string& key_path, const std::string& message)
    : std::runtime_error(located(file, line, key_path, message)), key_path_(key_path), message_(message) {}

}  // namespace dpsim
