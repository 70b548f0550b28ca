#include "yaml_node.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "dpsim/error.hpp"
#include "dpsim/suggest.hpp"
#include "dpsim/units.hpp"

namespace dpsim {

namespace {

// Recursion keeps yaml-cpp's node handles copied, never re-assigned (assignment would alias nodes).
void set_in(YAML::Node node, const std::vector<std::string>& parts, size_t i, const YAML::Node& value,
            const std::string& file, const std::string& key_path) {
  if (i + 1 == parts.size()) {
    node[parts[i]] = value;
    return;
  }
  const YAML::Node child = node[parts[i]];
  if (child.IsDefined() && !child.IsNull() && !child.IsMap()) {
    throw InputError(file, 0, key_path, fmt::format("cannot set {}: {} is not a mapping", key_path, parts[i]));
  }
  if (!child.IsDefined() || child.IsNull()) node[parts[i]] = YAML::Node(YAML::NodeType::Map);
  set_in(node[parts[i]], parts, i + 1, value, file, key_path);
}

}  // namespace

YNode::YNode(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {}

YNode YNode::load_file(const std::filesystem::path& file, Nodes nodes) {
  const std::string name = file.string();
  const YAML::Node root = load_yaml_file(file, nodes);
  if (!root.IsMap()) throw InputError(name, root.Mark().line + 1, "", "expected a mapping of keys at the top level");
  return YNode(root, name, "");
}

int YNode::line() const {
  const int l = node_.Mark().line;
  return l >= 0 ? l + 1 : parent_line_;
}

void YNode::fail(const std::string& message) const { throw InputError(file_, line(), path_, message); }

void YNode::require_map() const {
  if (!node_.IsMap()) fail("expected a mapping of keys");
}

bool YNode::has(const std::string& key) const {
  return node_.IsMap() && node_[key].IsDefined() && !node_[key].IsNull();
}

std::optional<YNode> YNode::get(const std::string& key) const {
  require_map();
  if (!has(key)) return std::nullopt;
  YNode child(node_[key], file_, path_.empty() ? key : path_ + "." + key);
  child.parent_line_ = line();
  return child;
}

YNode YNode::at(const std::string& key) const {
  auto child = get(key);
  if (!child) fail(fmt::format("missing required key \"{}\"", key));
  return *child;
}

std::vector<std::string> YNode::keys() const {
  std::vector<std::string> out;
  if (!node_.IsMap()) return out;
  for (const auto& kv : node_) out.push_back(kv.first.Scalar());
  return out;
}

void YNode::allow_only(std::initializer_list<const char*> allowed) const {
  allow_only(std::vector<std::string>(allowed.begin(), allowed.end()));
}

void YNode::allow_only(const std::vector<std::string>& names) const {
  require_map();
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar())  // "? [a, b]: 1" or an alias of a list used as a key
      throw InputError(file_, kv.first.Mark().line + 1, path_, "a key must be a name, not a list or mapping");
    const std::string key = kv.first.Scalar();
    if (std::find(names.begin(), names.end(), key) != names.end()) continue;
    const std::string where = path_.empty() ? key : path_ + "." + key;
    throw InputError(file_, kv.first.Mark().line + 1, where,
                     fmt::format("unknown key \"{}\"{}", key, did_you_mean(key, names)));
  }
}

void YNode::set_path(const std::string& key_path, const std::string& yaml_value) {
  YAML::Node value;
  try {
    value = YAML::Load(yaml_value);
  } catch (const YAML::Exception& e) {
    throw InputError(file_, 0, key_path, fmt::format("override value \"{}\" is not valid YAML: {}", yaml_value, e.msg));
  }
  std::vector<std::string> parts;
  for (size_t start = 0; start <= key_path.size();) {
    const size_t dot = std::min(key_path.find('.', start), key_path.size());
    parts.push_back(key_path.substr(start, dot - start));
    start = dot + 1;
  }
  if (parts.empty() || parts.back().empty()) throw InputError(file_, 0, key_path, "empty override key");
  set_in(node_, parts, 0, value, file_, key_path);
}

size_t YNode::size() const {
  if (!node_.IsSequence()) fail("expected a list");
  return node_.size();
}

YNode YNode::operator[](size_t index) const {
  YNode child(node_[index], file_, fmt::format("{}[{}]", path_, index));
  child.parent_line_ = line();
  return child;
}

std::string YNode::as_string() const {
  if (!node_.IsScalar()) fail("expected a single value");
  return node_.Scalar();
}

bool YNode::as_bool() const {
  const std::string s = as_string();
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  fail(fmt::format("expected true or false, got \"{}\"", s));
}

double YNode::as_number() const {
  const std::string s = as_string();
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(s, &used);
    if (used != s.size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    fail(fmt::format("expected a number, got \"{}\"", s));
  }
  if (!std::isfinite(value)) fail(fmt::format("expected a finite number, got \"{}\"", s));
  return value;
}

double YNode::as_positive_number() const {
  const double v = as_number();
  if (v <= 0) fail(fmt::format("must be greater than 0, got {}", as_string()));
  return v;
}

int64_t YNode::as_int(int64_t min_value, int64_t max_value) const {
  const std::string s = as_string();
  long long value = 0;
  try {
    size_t used = 0;
    value = std::stoll(s, &used);
    if (used != s.size()) throw std::invalid_argument("trailing");
  } catch (const std::out_of_range&) {
    fail(fmt::format("\"{}\" is out of range ({}..{})", s, min_value, max_value));
  } catch (const std::exception&) {
    fail(fmt::format("expected a whole number, got \"{}\"", s));
  }
  if (value < min_value || value > max_value)
    fail(fmt::format("{} is out of range ({}..{})", value, min_value, max_value));
  return value;
}

template <typename Parse>
double YNode::parse_unit(Parse parse) const {
  const std::string s = as_string();
  try {
    return parse(s);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
}

double YNode::as_bytes() const {
  const double v = parse_unit(parse_bytes);
  if (v <= 0) fail(fmt::format("must be greater than 0, got \"{}\"", as_string()));
  if (v > 9.0e18) fail(fmt::format("\"{}\" overflows a 64-bit byte count", as_string()));
  return v;
}

double YNode::as_bandwidth() const {
  const double v = parse_unit(parse_bandwidth_bytes_per_s);
  if (v <= 0) fail(fmt::format("must be greater than 0, got \"{}\"", as_string()));
  return v;
}

double YNode::as_seconds() const {
  const double v = parse_unit(parse_seconds);
  if (v < 0) fail(fmt::format("must not be negative, got \"{}\"", as_string()));
  return v;
}

double YNode::as_flops() const {
  const double v = parse_unit(parse_flops_per_s);
  if (v <= 0) fail(fmt::format("must be greater than 0, got \"{}\"", as_string()));
  return v;
}

}  // namespace dpsim
