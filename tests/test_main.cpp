#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "source_dir.hpp"

const char* dpsim::test::source_dir() { return DPSIM_SOURCE_DIR_PATH; }
