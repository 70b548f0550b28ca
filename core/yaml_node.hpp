#pragma once
// Private to core: a yaml-cpp node that knows its file and key path, so every error can say
// "file:line: key.path: message". Unknown keys are rejected with a did-you-mean.
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace dpsim {

// Reads and parses a YAML or JSON input file, refusing what no input needs (more than 16 MiB, binary data,
// absurd nesting) and what YAML would read silently one way (duplicate keys, keys without a value, a second
// document); an empty file is refused. Every loader reads through this (core/yaml_load.cpp). A caller that changes
// the nodes (a scenario's overrides) asks for its own; read-only callers may share a kept parse (keep_parsed_files_of).
enum class Nodes { read_only, changed_by_caller };
YAML::Node load_yaml_file(const std::filesystem::path& file, Nodes nodes = Nodes::read_only);
// The same checks on a text read from `file`: with StructurePass::as_needed (load_yaml_file's) yaml-cpp parses the text
// once unless the tree may not hold all of it; with StructurePass::always a second parse of its events checks it too
// (tests compare the two).
enum class StructurePass { as_needed, always };
YAML::Node parse_yaml_text(const std::string& text, const std::filesystem::path& file, StructurePass pass);
// Whether `root`, parsed from `text`, holds all of it, so that the one parse suffices (core/yaml_load.cpp says how).
bool tree_holds_whole_text(const std::string& text, const YAML::Node& root);

class YNode {
 public:
  YNode(YAML::Node node, std::string file, std::string path);
  static YNode load_file(const std::filesystem::path& file, Nodes nodes = Nodes::read_only);

  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  int line() const;
  [[noreturn]] void fail(const std::string& message) const;

  bool is_map() const { return node_.IsMap(); }
  bool is_sequence() const { return node_.IsSequence(); }
  bool is_scalar() const { return node_.IsScalar(); }
  bool has(const std::string& key) const;
  YNode at(const std::string& key) const;  // required
  std::optional<YNode> get(const std::string& key) const;
  std::vector<std::string> keys() const;
  void allow_only(std::initializer_list<const char*> keys) const;
  void allow_only(const std::vector<std::string>& keys) const;
  void require_map() const;
  // Set a dotted key path to a YAML value, creating maps on the way (scenario overrides).
  void set_path(const std::string& key_path, const std::string& yaml_value);

  size_t size() const;
  YNode operator[](size_t index) const;

  std::string as_string() const;
  bool as_bool() const;
  double as_number() const;           // finite
  double as_positive_number() const;  // finite, > 0
  int64_t as_int(int64_t min_value, int64_t max_value) const;
  double as_bytes() const;      // > 0
  double as_bandwidth() const;  // > 0
  double as_seconds() const;    // >= 0
  double as_flops() const;      // > 0

  template <typename E>
  E as_enum(std::initializer_list<std::pair<const char*, E>> choices) const {
    const std::string value = as_string();
    std::string names;
    for (const auto& [name, e] : choices) {
      if (value == name) return e;
      names += names.empty() ? name : std::string(", ") + name;
    }
    fail("\"" + value + "\" is not one of: " + names);
  }

 private:
  YAML::Node node_;
  std::string file_;
  std::string path_;
  int parent_line_ = 0;
  template <typename Parse>
  double parse_unit(Parse parse) const;
};

}  // namespace dpsim
