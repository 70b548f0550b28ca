#pragma once
// Input errors name the file, line and key path: "scenarios/x.yaml:12: cluster.nodes: must be > 0".
#include <stdexcept>
#include <string>

namespace dpsim {

class InputError : public std::runtime_error {
 public:
  InputError(const std::string& file, int line, const std::string& key_path, const std::string& message);
  explicit InputError(const std::string& message) : std::runtime_error(message), message_(message) {}
  const std::string& key_path() const { return key_path_; }  // empty when the error names no key
  const std::string& message() const { return message_; }    // what() without file, line and key path
  const std::string& file() const { return file_; }          // empty when the error names no file
  int line() const { return line_; }                         // 0 when it names no line

 private:
  std::string file_;
  int line_ = 0;
  std::string key_path_;
  std::string message_;
};

// A failure of the environment (unwritable output, missing backend), not of the input.
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace dpsim
