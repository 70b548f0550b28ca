#pragma once
// Checks of command-line values (CLI11 validators): a value that cannot mean what the option says is refused
// with the option's name and exit 2, never quietly replaced by the default.
#include <cstdint>

#include <CLI/CLI.hpp>

namespace dpsim::app {

// A finite number greater than 0 (refuses nan, inf, 0 and negatives): "--max-events: must be a finite number
// > 0, got nan".
CLI::Validator finite_positive();

// A whole number from `low` to `high`: "--nodes: must be a whole number from 1 to 1048576, got 0".
CLI::Validator whole_number_in(int64_t low, int64_t high);

// A size with a unit (core/units.cpp parse_bytes), above 0: "--max-memory: cannot parse \"lots\" as a size ...".
CLI::Validator positive_size();

// A non-empty text (a path): "--trace: must not be empty (give a file name)".
CLI::Validator non_empty();

}  // namespace dpsim::app
