#pragma once
// One module parses every quantity with a unit: "450GBps", "400Gbps", "2.5us", "25MiB", "989TFLOPS".
// B is a byte and b a bit; K/M/G/T/P are powers of 1000, Ki/Mi/Gi/Ti powers of 1024.
#include <string>
#include <string_view>

namespace dpsim {

double parse_bytes(std::string_view text);                  // -> bytes
double parse_bandwidth_bytes_per_s(std::string_view text);  // -> bytes per second
double parse_seconds(std::string_view text);                // -> seconds
double parse_flops_per_s(std::string_view text);            // -> floating-point operations per second

// Human-readable forms for tables: "16.06 GB", "450.0 GB/s", "62.5 ms".
std::string format_bytes(double bytes);
std::string format_bandwidth(double bytes_per_s);
std::string format_seconds(double seconds);
std::string format_count(double count);  // 8,030,261,248
// A message size as nccl-tests sweeps label it: powers of two in binary units ("1MiB", "8GiB"), others in bytes.
std::string format_size_label(double bytes);

}  // namespace dpsim
