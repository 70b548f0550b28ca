#include "dpsim/error.hpp"
#include "dpsim/escape.hpp"

#include <fmt/format.h>

namespace dpsim {

std::string escape_controls(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

std::string located(const std::string& file, int line, const std::string& key_path, const std::string& message) {
  std::string where = file;
  if (line > 0) where += fmt::format(":{}", line);
  if (!key_path.empty()) where += fmt::format(": {}", key_path);
  return escape_controls(where.empty() ? message : where + ": " + message);
}
}  // namespace

InputError::InputError(const std::string& file, int line, const std::string& key_path, const std::string& message)
    : std::runtime_error(located(file, line, key_path, message)),
      file_(escape_controls(file)),
      line_(line),
      key_path_(escape_controls(key_path)),
      message_(escape_controls(message)) {}

}  // namespace dpsim
