// The one guarded way dpsim reads a YAML (or JSON) input file: bounded size, no binary data, bounded
// nesting, and refused where yaml-cpp would silently keep one reading of an ambiguous file: a key
// written twice (one value would be dropped), a key with no value in a YAML file (`key:` or `key: null`
// would be taken as "not given", i.e. the default; a JSON file's null, as in Hugging Face's config.json,
// means "not set" by convention and stays allowed), a second document after `---` (never read).
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
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

// Walks the parser's events (aliases are events, never expanded: linear in the text) and refuses
// duplicate keys, keys without a value, and a second document. A second parse of the text: check_structure runs it
// only where the parsed tree may not hold the whole text (tree_holds_whole_text); otherwise TreeCheck makes the same
// checks on the tree.
class StructureCheck : public YAML::EventHandler {
 public:
  StructureCheck(std::string file, bool allow_null) : file_(std::move(file)), allow_null_(allow_null) {}
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override {  // `key:` marks the next line: name the key's
    if (!allow_null_ && !stack_.empty() && stack_.back().is_map && !stack_.back().expecting_key) {
      throw InputError(file_, stack_.back().key_line, child_path(), no_value_message());
    }
    value(mark, "");
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { value(mark, ""); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string& text) override {
    value(mark, text);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(mark, false);
  }
  void OnSequenceEnd() override { stack_.pop_back(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(mark, true);
  }
  void OnMapEnd() override { stack_.pop_back(); }

  static std::string no_value_message() {
    return "has no value (empty or null); give a value, or remove the key to use its default";
  }
  static std::string duplicate_message(const std::string& key, int first_line) {
    return fmt::format("duplicate key \"{}\" (first at line {}); YAML would keep only one of them", key, first_line);
  }

 private:
  struct Frame {
    bool is_map = false;
    std::string path;
    bool expecting_key = true;         // maps: the next event is a key
    std::string key;                   // maps: the key whose value comes next
    int key_line = 0;                  // maps: its line
    size_t items = 0;                  // sequences: elements so far
    std::map<std::string, int> lines;  // maps: key -> line of its first occurrence
  };

  std::string child_path() const {
    const Frame& f = stack_.back();
    const std::string leaf = f.is_map ? f.key : fmt::format("[{}]", f.items);
    if (f.path.empty()) return leaf;
    return f.is_map ? f.path + "." + leaf : f.path + leaf;
  }

  // A scalar, null, alias, or the start of a collection: a key or a value of the enclosing collection.
  void value(const YAML::Mark& mark, const std::string& text) {
    if (stack_.empty()) return;
    Frame& f = stack_.back();
    if (!f.is_map) {
      ++f.items;
      return;
    }
    if (!f.expecting_key) {
      f.expecting_key = true;
      return;
    }
    f.expecting_key = false;
    f.key = text;
    f.key_line = mark.line + 1;
    const auto [it, fresh] = f.lines.emplace(text, mark.line + 1);
    if (!fresh && !text.empty())
      throw InputError(file_, mark.line + 1, child_path(), duplicate_message(text, it->second));
  }

  void open(const YAML::Mark& mark, bool is_map) {
    const std::string path = stack_.empty() ? "" : child_path();
    value(mark, "");
    stack_.push_back({is_map, path, true, "", 0, 0, {}});
  }

  std::string file_;
  bool allow_null_;
  std::vector<Frame> stack_;
};

// StructureCheck's duplicate keys and keys without a value, found on the parsed tree (yaml-cpp keeps both pairs of a
// key written twice), in the same order and with the same messages. An alias shares its anchor's node: each map or
// sequence is walked once (by its position and kind), so nested aliases stay linear in the text.
class TreeCheck {
 public:
  TreeCheck(std::string file, bool allow_null) : file_(std::move(file)), allow_null_(allow_null) {}

  void walk(const YAML::Node& node, const std::string& path) {
    if (!node.IsMap() && !node.IsSequence()) return;
    if (!walked_.insert({node.Mark().pos, node.IsMap()}).second) return;
    if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) walk(node[i], fmt::format("{}[{}]", path, i));
      return;
    }
    std::map<std::string, int> lines;  // key -> line of its first occurrence
    for (const auto& pair : node) {
      const std::string key = pair.first.IsScalar() ? pair.first.Scalar() : "";
      const int line = pair.first.Mark().line + 1;
      const std::string child = path.empty() ? key : path + "." + key;
      const auto [it, fresh] = lines.emplace(key, line);
      if (!fresh && !key.empty())
        throw InputError(file_, line, child, StructureCheck::duplicate_message(key, it->second));
      if (!allow_null_ && pair.second.IsNull())
        throw InputError(file_, line, child, StructureCheck::no_value_message());
      walk(pair.first, child);
      walk(pair.second, child);
    }
  }

 private:
  std::string file_;
  bool allow_null_;
  std::set<std::pair<int, bool>> walked_;  // (position, is a map) of the collections walked
};

void check_structure(const std::string& text, const std::filesystem::path& path, const YAML::Node& root,
                     StructurePass pass) {
  const std::string file = path.string();
  const bool allow_null = path.extension() == ".json";
  if (pass == StructurePass::as_needed && tree_holds_whole_text(text, root)) {
    TreeCheck(file, allow_null).walk(root, "");
    return;
  }
  std::istringstream in(text);
  YAML::Parser parser(in);
  StructureCheck check(file, allow_null);
  try {
    if (!parser.HandleNextDocument(check)) return;
    StructureCheck second(file, allow_null);
    if (parser.HandleNextDocument(second)) {
      throw InputError(file, 0, "",
                       "holds a second YAML document (after ---), which dpsim would not read; one document per file");
    }
  } catch (const YAML::Exception&) {
    // a syntax error: YAML::Load below reports it with its line
  }
}

YAML::Node parse_checked(const std::string& text, const std::filesystem::path& file,
                         StructurePass pass = StructurePass::as_needed) {
  const std::string name = file.string();
  if (text.find('\0') != std::string::npos) throw InputError(name, 0, "", "binary data, not YAML text");
  check_nesting(text, name);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message for this is "bad file"
    throw InputError(name, e.mark.line + 1, "", "not valid YAML: nested too deeply");
  } catch (const YAML::Exception& e) {
    throw InputError(name, e.mark.line + 1, "", "not valid YAML: " + e.msg);
  }
  if (!root || root.IsNull()) throw InputError(name, 0, "", "the file is empty");
  check_structure(text, file, root, pass);
  return root;
}

// keep_parsed_files_of: the kept parses, by file name, with the text they were parsed from.
struct KeptParse {
  std::string text;
  YAML::Node root;
};
std::map<std::string, KeptParse> g_kept;
bool g_keeping = false;  // true while keep_parsed_files_of loads

}  // namespace

// Whether yaml-cpp's tree holds the whole text, so that TreeCheck alone may check it: no document marker after the
// first document's content (`---`, or anything after `...`), and every line that starts at column 0 starts one of the
// root's entries (yaml-cpp's Load ends the document silently at a column-0 token it cannot place, as in `- a` then
// `c: 1`; StructureCheck's second pass refuses what follows). Conservative: anything else (a quoted scalar continued at
// column 0, a flow collection closed there, JSON's closing brace) takes the second pass.
bool tree_holds_whole_text(const std::string& text, const YAML::Node& root) {
  std::set<int> entry_lines;  // 0-based, as yaml-cpp's marks
  if (root.IsMap())
    for (const auto& pair : root) entry_lines.insert(pair.first.Mark().line);
  if (root.IsSequence())
    for (const auto& item : root) entry_lines.insert(item.Mark().line);
  const auto has_content = [](std::string_view part) {
    const size_t first = part.find_first_not_of(" \t\r");
    return first != std::string_view::npos && part[first] != '#';
  };
  bool content = false;
  int number = 0;
  for (size_t start = 0; start < text.size(); ++number) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    const auto marker = [&](std::string_view m) {
      return line.substr(0, 3) == m && (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    };
    if (marker("---") && !content) {
      content = has_content(line.substr(3));
      continue;
    }
    if (!has_content(line) || line[0] == ' ' || line[0] == '\t') continue;
    if (!content && line[0] == '%') continue;  // a directive (%YAML, %TAG) before the document
    if (marker("---") || marker("...") || !entry_lines.count(number)) return false;
    content = true;
  }
  return true;
}

YAML::Node parse_yaml_text(const std::string& text, const std::filesystem::path& file, StructurePass pass) {
  return parse_checked(text, file, pass);
}

YAML::Node load_yaml_file(const std::filesystem::path& file, Nodes nodes) {
  // While keeping, regular files only: a FIFO could block the sweep's parent, which no --point-timeout covers.
  std::error_code ec;
  if (g_keeping && !std::filesystem::is_regular_file(file, ec))
    throw RuntimeError(file.string() + ": not a regular file; not kept");
  const std::string text = read_input_file(file);
  if (const auto kept = g_kept.find(file.string());
      kept != g_kept.end() && !g_keeping && nodes == Nodes::read_only && kept->second.text == text)
    return kept->second.root;  // every read-only load shares them (a sweep worker's points, one after another)
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
