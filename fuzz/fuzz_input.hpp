#pragma once
// Shared by the loader fuzz targets: write the fuzzer's bytes to a file in a private temporary tree that
// looks like the source tree (scenarios/ beside models/ and topologies/), so relative references in a
// scenario ("../models/x.yaml", "h100-8x-nvswitch") or a sweep ("base: ../x.yaml") resolve as they do for
// shipped files.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#ifndef DPSIM_SOURCE_DIR
#error "DPSIM_SOURCE_DIR must name the source tree"
#endif

namespace dpsim_fuzz {

namespace fs = std::filesystem;

class Sandbox {
 public:
  Sandbox() {
    std::string pattern = (fs::temp_directory_path() / "dpsim-fuzz-XXXXXX").string();
    if (!mkdtemp(pattern.data())) std::abort();
    root_ = pattern;
    const fs::path src(DPSIM_SOURCE_DIR);
    // root/models and root/x/{models,topologies}: "../models" and "../../models" both resolve.
    fs::create_directories(root_ / "x" / "scenarios");
    fs::create_directory_symlink(src / "models", root_ / "models");
    fs::create_directory_symlink(src / "models", root_ / "x" / "models");
    fs::create_directory_symlink(src / "topologies", root_ / "x" / "topologies");
    // root/x/NAME.yaml -> scenarios/NAME.yaml: a sweep's "base: ../NAME.yaml" resolves as from scenarios/sweeps/.
    for (const auto& e : fs::directory_iterator(src / "scenarios"))
      if (e.path().extension() == ".yaml") fs::create_symlink(e.path(), root_ / "x" / e.path().filename());
    file_ = root_ / "x" / "scenarios" / "input.yaml";
  }
  ~Sandbox() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Writes the bytes and returns the file's path.
  const fs::path& write(const uint8_t* data, size_t size) {
    std::ofstream out(file_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) std::abort();
    return file_;
  }

 private:
  fs::path root_;
  fs::path file_;
};

inline Sandbox& sandbox() {
  static Sandbox s;  // destroyed at exit: the temporary tree goes with it
  return s;
}

}  // namespace dpsim_fuzz
