#include "dpsim/input_file.hpp"

#include <fstream>

#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "dpsim/hash.hpp"

namespace dpsim {

namespace fs = std::filesystem;

namespace {

thread_local InputLog* t_innermost = nullptr;

// Reads at most limit + 1 bytes: a device or pipe (/dev/zero, a FIFO) has no size to check up front.
std::string read_bounded(std::ifstream& in, std::uintmax_t limit) {
  std::string text;
  char chunk[65536];
  while (in && text.size() <= limit) {
    in.read(chunk, sizeof chunk);
    text.append(chunk, static_cast<size_t>(in.gcount()));
  }
  return text;
}

}  // namespace

InputLog::InputLog() : outer_(t_innermost) { t_innermost = this; }

InputLog::~InputLog() { t_innermost = outer_; }

void note_input_file(const fs::path& file, const std::string& text) {
  if (!t_innermost) return;
  std::error_code ec;
  const fs::path absolute = fs::absolute(file, ec);
  const std::string path = (ec ? file : absolute).lexically_normal().string();
  const std::string hash = fnv1a64(text);
  for (InputLog* log = t_innermost; log; log = log->outer_) log->files_[path] = hash;
}

void note_input_files(const std::map<std::string, std::string>& files) {
  for (InputLog* log = t_innermost; log; log = log->outer_)
    for (const auto& [path, hash] : files) log->files_[path] = hash;
}

std::string read_input_file(const fs::path& file) {
  const std::string name = file.string();
  if (name.empty()) throw InputError("an input file name is empty");
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
    throw InputError(name, 0, "", "cannot be accessed: " + ec.message());
  if (!fs::exists(status)) throw InputError(name, 0, "", "no such file");
  if (fs::is_directory(status)) throw InputError(name, 0, "", "is a directory, not a file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(name, 0, "", "cannot be read (permission denied?)");
  if (fs::is_regular_file(status)) {
    const auto size = fs::file_size(file, ec);
    if (!ec && size > kMaxInputBytes) {
      throw InputError(name, 0, "",
                       fmt::format("file is {} bytes; input files are limited to {} bytes", size, kMaxInputBytes));
    }
  }
  std::string text = read_bounded(in, kMaxInputBytes);
  if (text.size() > kMaxInputBytes) {
    throw InputError(
        name, 0, "",
        fmt::format("file is more than {} bytes; input files are limited to {} bytes", kMaxInputBytes, kMaxInputBytes));
  }
  if (in.bad()) throw InputError(name, 0, "", "cannot be read (I/O error)");
  note_input_file(file, text);
  return text;
}

}  // namespace dpsim
