#pragma once
// The one comparison module: predicted vs measured, phase by phase and bucket by bucket, and the
// error statistics (relative error, median, worst) that the reference scoring uses as well.
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dpsim/result.hpp"

namespace dpsim::validation {

// (predicted - measured) / measured; 0 when both are 0; +-inf when only measured is 0.
double relative_error(double predicted, double measured);

// A value that may be a range (a published "365-370"): the error is 0 inside it, else relative to the nearer end.
double relative_error_to_range(double predicted, double low, double high);

struct ErrorStats {
  int count = 0;
  double median_abs = 0;  // median of |relative error|
  double worst_abs = 0;   // max of |relative error|
  double mean_signed = 0;
};
ErrorStats error_stats(const std::vector<double>& relative_errors);

struct CompareRow {
  std::string name;  // "step", "forward", "bucket 3 start", ...
  double predicted = 0;
  double measured = 0;
  double abs_error = 0;     // predicted - measured (seconds)
  double rel_error = 0;     // relative_error(predicted, measured)
  double judged_error = 0;  // |predicted - measured| / max(|measured|, floor): what the verdict uses
  bool within = true;
};

struct Comparison {
  std::string scenario;
  double tolerance = 0.10;
  std::string tolerance_from;       // "--tolerance", "measured context", "scenario", "default"
  double floor_s = 0;               // 5% of the measured step: small phases are judged against it
  std::vector<CompareRow> phases;   // forward, backward, exposed communication, optimizer, step
  std::vector<CompareRow> buckets;  // schema-1 results (no comm[]): per DDP bucket in launch order, start and duration
  std::vector<CompareRow> comms;    // per collective matched by (kind, group, index): start and duration
  std::vector<std::string> notes;   // mismatches (bucket count, unmatched collectives, world size, mode)
  bool pass = true;
};

// Compare two results of the same scenario: phases, then the collectives matched by (kind, group, index) where both
// carry comm[] (schema 2), else the DDP buckets in launch order. Rows are judged by |p - m| / max(|m|, floor_s) with
// floor_s = 5% of the measured step time, so a 0.1 ms phase is not failed for a 0.05 ms miss.
Comparison compare(const StepResult& predicted, const StepResult& measured, double tolerance);

// The tolerance to judge by: explicit, else "validation.tolerance"/"tolerance" in the measured or
// predicted context, else the scenario's, else 0.10. `from` says which.
double pick_tolerance(std::optional<double> explicit_tolerance, const StepResult& predicted, const StepResult& measured,
                      std::optional<double> scenario_tolerance, std::string* from);

std::string render_comparison(const Comparison& comparison);

// Thrown (after the table is printed) when a comparison is outside its tolerance: main() turns it into exit status 1.
class ValidationFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Columns separated by two spaces, each as wide as its widest cell; the first row is the header.
std::string text_table(const std::vector<std::vector<std::string>>& rows);
std::string percent(double relative);  // "+3.2%", "-0.4%", "inf"

}  // namespace dpsim::validation
