#include <catch2/catch.hpp>

#include "dpsim/units.hpp"

using namespace dpsim;

TEST_CASE("bytes: decimal and binary prefixes differ") {
  CHECK(parse_bytes("25MiB") == 25.0 * 1024 * 1024);
  CHECK(parse_bytes("25MB") == 25e6);
  CHECK(parse_bytes("80GiB") == 80.0 * 1073741824.0);
  CHECK(parse_bytes("1.5 KB") == 1500.0);
}

TEST_CASE("bandwidth: B is bytes, b is bits") {
  CHECK(parse_bandwidth_bytes_per_s("450GBps") == 450e9);
  CHECK(parse_bandwidth_bytes_per_s("450GB/s") == 450e9);
  CHECK(parse_bandwidth_bytes_per_s("400Gbps") == 50e9);
  CHECK(parse_bandwidth_bytes_per_s("100Gb/s") == 12.5e9);
}

TEST_CASE("time and flops") {
  CHECK(parse_seconds("2.5us") == Approx(2.5e-6));
  CHECK(parse_seconds("1ms") == Approx(1e-3));
  CHECK(parse_flops_per_s("989TFLOPS") == Approx(989e12));
}

TEST_CASE("unparseable units are refused with the text") {
  CHECK_THROWS_WITH(parse_bandwidth_bytes_per_s("fast"), Catch::Contains("cannot parse \"fast\""));
  CHECK_THROWS_WITH(parse_bandwidth_bytes_per_s("10 GB/s/s"), Catch::Contains("unknown unit \"GB/s/s\""));
  CHECK_THROWS_WITH(parse_bytes("nan GB"), Catch::Contains("not a finite"));
  CHECK_THROWS(parse_seconds("5 parsecs"));
  CHECK_THROWS(parse_bytes(""));
}

TEST_CASE("formatting") {
  CHECK(format_count(8030261248.0) == "8,030,261,248");
  CHECK(format_bytes(16.06e9) == "16.06 GB");
  CHECK(format_seconds(0.0625) == "62.50 ms");
}

TEST_CASE("values that overflow a double after the unit are refused, never inf") {
  CHECK_THROWS_WITH(parse_bytes("1e300 TB"), "\"1e300 TB\" is out of range");
  CHECK_THROWS_WITH(parse_bandwidth_bytes_per_s("1e308 Tbps"), "\"1e308 Tbps\" is out of range");
  CHECK_THROWS_WITH(parse_bytes("1e999 B"), "\"1e999 B\" is out of range");
  CHECK_THROWS_WITH(parse_seconds("inf s"), "\"inf s\" is not a finite number");
  CHECK(parse_bytes("1e300 B") == 1e300);  // finite: the caller decides whether it is absurd
}
