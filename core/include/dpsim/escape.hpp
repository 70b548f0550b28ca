#pragma once
// Control characters of input text shown escaped ("\x1b[2J" as the 7 characters \x1b[2J, a newline as \n), so
// that a key, value or path echoed in a message cannot clear or recolour the user's terminal. Every located
// InputError (file:line: key: message) is escaped this way; main() escapes what it prints of any other error.
#include <string>

namespace dpsim {

std::string escape_controls(const std::string& text);

}  // namespace dpsim
