// The one guarded way dpsim reads a YAML (or JSON) input file: bounded size, no binary data, bounded
// nesting, and refused where yaml-cpp would silently keep one reading of an ambiguous file: a key
// written twice (one value would be dropped), a key with no value in a YAML file (`key:` or `key: null`
// would be taken as "not given", i.e. the default; a JSON file's null, as in Hugging Face's config.json,
// means "not set" by convention and stays allowed), a second document after `---` (never read).
#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "dpsim/error.hpp"
#include "dpsim/input_file.hpp"
#include "dpsim/load.hpp"
#include "load_internal.hpp"
#include "yaml_node.hpp"

namespace dpsim {

namespace {

constexpr int kMaxNesting = 64;  // yaml-cpp recurses per level

// yaml-cpp parses recursively (it gives up with a "bad file" DeepRecursion at about 500 levels); refuse
// absurd nesting first, with a message that says what is wrong. Flow nesting counts brackets outside
// quoted scalars and comments; block nesting is bounded by the column where a line's content starts
// (after its indentation and any "- " or "? " indicators).
void check_nesting(const std::string& text, const std::string& file) {
  constexpr int kMaxColumn = 2 * 4 * kMaxNesting;
  int depth = 0, line = 1, column = 0;
  bool line_start = true;  // still in the line's indentation and indicators
  char quote = 0;          // the open quote, or 0
  char prev = '\n';
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      column = 0;
      line_start = true;
      prev = c;
      continue;
    }
    if (quote) {
      if (quote == '"' && c == '\\') {
        ++i;  // an escaped character, perhaps a quote
      } else if (c == quote) {
        quote = 0;
      }
      prev = c;
      continue;
    }
    const bool after_space = prev == ' ' || prev == '\t' || prev == '\n';
    if (line_start) {
      const bool indicator = (c == '-' || c == '?') && (i + 1 == text.size() || text[i + 1] == ' ');
      if (c == ' ' || indicator) {
        if (++column > kMaxColumn) throw InputError(file, line, "", "indentation deeper than any scenario needs");
        prev = c;
        continue;
      }
      line_start = false;
    }
    if (c == '#' && after_space) {  // a comment runs to the end of the line
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if ((c == '"' || c == '\'') && (after_space || prev == '[' || prev == '{' || prev == ',' || prev == ':')) {
      quote = c;  // a quote opens a quoted scalar only where a scalar can start ("it's" is plain text)
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting)
        throw InputError(file, line, "", fmt::format("nesting deeper than {} levels", kMaxNesting));
    } else if (c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    }
    prev = c;
  }
}

// Walks the parsed tree in document order and refuses duplicate keys and keys without a value, on the one
// parse the loaders read (the text is scanned once: yaml-cpp's scanner is most of a load's time). yaml-cpp keeps
// both pairs of a duplicate key, and an alias shares its anchor's node: a collection reached again through an
// alias has the mark of where it was parsed, at or before the walk's position, so it is not walked again (the
// walk stays linear in the text, and ends on a collection that holds an alias of itself); an alias of a null is
// not "no value" (its mark precedes its key's).
class StructureCheck {
 public:
  StructureCheck(std::string file, bool allow_null) : file_(std::move(file)), allow_null_(allow_null) {}

  void check(const YAML::Node& root) {
    visit(root, [] { return std::string(); });
  }

 private:
  // A key, a value or an item: moves the walk's position to it, and walks a collection not walked yet. `path`
  // makes the node's key path, only for a collection (most nodes are scalars).
  template <typename Path>
  void visit(const YAML::Node& node, const Path& path) {
    const int pos = node.Mark().pos;
    if (node.IsScalar()) passed_ = std::max(passed_, pos);
    if (!(node.IsMap() || node.IsSequence()) || pos <= passed_) return;  // <=: an alias of a collection walked
    passed_ = pos;
    if (node.IsMap()) {
      walk_map(node, path());
    } else {
      walk_sequence(node, path());
    }
  }

  static std::string child(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  void walk_sequence(const YAML::Node& sequence, const std::string& path) {
    size_t index = 0;
    for (const YAML::Node& item : sequence) {
      visit(item, [&] { return fmt::format("{}[{}]", path, index); });
      ++index;
    }
  }

  void walk_map(const YAML::Node& map, const std::string& path) {
    std::map<std::string, int> lines;  // key -> line of its first occurrence
    std::string previous;              // the key before, which a key that is a collection is reported under
    for (const auto& kv : map) {
      const YAML::Node& key = kv.first;
      const YAML::Node& value = kv.second;
      visit(key, [&] { return child(path, previous); });
      const std::string text = key.IsScalar() ? key.Scalar() : "";
      const int line = key.Mark().line + 1;
      const auto [it, fresh] = lines.emplace(text, line);
      if (!fresh && !text.empty()) {
        throw InputError(
            file_, line, child(path, text),
            fmt::format("duplicate key \"{}\" (first at line {}); YAML would keep only one of them", text, it->second));
      }
      if (value.IsNull() && !allow_null_ && value.Mark().pos > key.Mark().pos) {  // `key:` marks the next line
        throw InputError(file_, line, child(path, text),
                         "has no value (empty or null); give a value, or remove the key to use its default");
      }
      visit(value, [&] { return child(path, text); });
      previous = text;
    }
  }

  std::string file_;
  bool allow_null_;
  int passed_ = -1;  // the furthest mark (text position) walked
};

YAML::Node parse_checked(const std::string& text, const std::filesystem::path& file) {
  const std::string name = file.string();
  if (text.find('\0') != std::string::npos) throw InputError(name, 0, "", "binary data, not YAML text");
  check_nesting(text, name);
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message for this is "bad file"
    throw InputError(name, e.mark.line + 1, "", "not valid YAML: nested too deeply");
  } catch (const YAML::Exception& e) {
    throw InputError(name, e.mark.line + 1, "", "not valid YAML: " + e.msg);
  }
  if (documents.empty() || !documents[0] || documents[0].IsNull()) throw InputError(name, 0, "", "the file is empty");
  StructureCheck(name, file.extension() == ".json").check(documents[0]);
  if (documents.size() > 1) {
    throw InputError(name, 0, "",
                     "holds a second YAML document (after ---), which dpsim would not read; one document per file");
  }
  return documents[0];
}

// keep_parsed_files_of: the kept parses, by file name, with the text they were parsed from.
struct KeptParse {
  std::string text;
  YAML::Node root;
};
std::map<std::string, KeptParse> g_kept;
bool g_keeping = false;  // true while keep_parsed_files_of loads

}  // namespace

YAML::Node load_yaml_file(const std::filesystem::path& file) {
  // While keeping, regular files only: a FIFO could block the sweep's parent, which no --point-timeout covers.
  std::error_code ec;
  if (g_keeping && !std::filesystem::is_regular_file(file, ec))
    throw RuntimeError(file.string() + ": not a regular file; not kept");
  const std::string text = read_input_file(file);
  if (const auto kept = g_kept.find(file.string()); kept != g_kept.end() && !g_keeping) {
    KeptParse k = std::move(kept->second);
    g_kept.erase(kept);  // once per process: the caller may change the nodes (overrides)
    if (k.text == text) return k.root;
  }
  YAML::Node root = parse_checked(text, file);
  if (g_keeping) g_kept[file.string()] = {text, parse_checked(text, file)};  // its own nodes, untouched by the caller
  return root;
}

void keep_parsed_files_of(const std::filesystem::path& scenario) {
  g_keeping = true;
  try {
    load_scenario(scenario);
  } catch (const std::exception&) {
    // the points report it
  }
  try {
    load_yaml_file(optimizers_file());  // read by every point's step plan (optimizer_passes), not by the load
  } catch (const std::exception&) {
    // the points report it
  }
  g_keeping = false;
}

}  // namespace dpsim
