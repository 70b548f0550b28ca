#pragma once
// The source tree the tests read shipped files from. Its path is compiled into test_main.cpp alone, so that the
// other test objects do not depend on where the checkout lives (ccache then shares them between checkouts).

namespace dpsim::test {
const char* source_dir();
}  // namespace dpsim::test

#define DPSIM_SOURCE_DIR (::dpsim::test::source_dir())
