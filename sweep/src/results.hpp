#pragma once
// The output directory of a sweep, shared by the runner and the MPI ranks' merge: its lock, its results
// files, and the check that recorded rows belong to the sweep being resumed.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "dpsim/sweep_spec.hpp"

namespace dpsim {

// The whole of a file ("" when it cannot be read).
std::string read_text(const std::filesystem::path& file);

// An exclusive flock on a directory, held while this object (and any worker forked from it) lives.
// Throws RuntimeError when another process holds it: two sweeps never write into one directory at once.
class DirLock {
 public:
  explicit DirLock(const std::filesystem::path& dir);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

// The JSON rows of a results.jsonl text by point. A last line without its newline (cut by a kill or a power
// loss mid-append) is dropped: that point runs again. Any other line that is not a row is refused
// (InputError naming `file` and the line): the file was edited or corrupted.
std::map<int64_t, std::string> parse_results(const std::string& jsonl_text, const std::string& file);

// The same, read from a results.jsonl file (none: no rows).
std::map<int64_t, std::string> read_results(const std::filesystem::path& jsonl);

// Refuses (InputError) rows recorded by another sweep: a point index outside this sweep, axis values that
// differ from this sweep's point, or an input file (the sweep file, the base scenario and every file it
// read) whose content changed since the row was recorded. The message says what changed.
void check_recorded(const SweepSpec& sweep, const std::filesystem::path& jsonl,
                    const std::map<int64_t, std::string>& rows);

// Writes DIR/results.jsonl and DIR/results.csv (each atomically) holding `lines` in point order. `csv_rows`:
// the CSV rows already rendered, by point; the others are rendered from their JSON lines.
void write_results(const SweepSpec& sweep, const std::filesystem::path& dir,
                   const std::map<int64_t, std::string>& lines, const std::map<int64_t, std::string>& csv_rows = {});

// The CSV header line (no newline).
std::string csv_header_line(const SweepSpec& sweep);

// Appends one row to a file with a single write (a kill leaves at most one partial last line).
void append_line(const std::filesystem::path& file, const std::string& line);

}  // namespace dpsim
