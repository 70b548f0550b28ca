#pragma once
// Reading an input file (a scenario, a model, a topology, a calibration, an nccl-tests log): bounded in
// size, and recorded while an InputLog is open on this thread (a sweep records the files its points read
// as their identity, so that --resume can tell when an input changed under recorded results).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

namespace dpsim {

// No input dpsim reads is this large (a scenario is a few KB; an nccl-tests sweep log a few tens of KB).
inline constexpr std::uintmax_t kMaxInputBytes = 16u * 1024u * 1024u;

// The text of `file`, noted in the open InputLogs. Throws InputError naming the file when it is missing, a
// directory, unreadable, or larger than kMaxInputBytes (also for a device or pipe, read up to the limit).
std::string read_input_file(const std::filesystem::path& file);

// Called by every loader with the text it read from `file`.
void note_input_file(const std::filesystem::path& file, const std::string& text);

class InputLog {
 public:
  InputLog();  // logs may nest: every open log records each file read
  ~InputLog();
  InputLog(const InputLog&) = delete;
  InputLog& operator=(const InputLog&) = delete;
  // Absolute, normalised path -> fnv1a64 of the bytes read.
  const std::map<std::string, std::string>& files() const { return files_; }

 private:
  friend void note_input_file(const std::filesystem::path& file, const std::string& text);
  friend void note_input_files(const std::map<std::string, std::string>& files);
  std::map<std::string, std::string> files_;
  InputLog* outer_;
};

// Notes files already read (InputLog::files()) in the open InputLogs again.
void note_input_files(const std::map<std::string, std::string>& files);

// A value read from input files once per process (a data table kept in a static): every use notes the files it
// was read from in the open InputLogs, as reading them would, so that what a sweep point records as its inputs does
// not depend on what its worker process read for an earlier point.
template <class T>
class ReadOnce {
 public:
  explicit ReadOnce(const std::function<T()>& read) {
    InputLog log;
    value_ = read();
    files_ = log.files();
  }
  const T& get() const {
    note_input_files(files_);
    return value_;
  }

 private:
  T value_{};
  std::map<std::string, std::string> files_;
};

}  // namespace dpsim
