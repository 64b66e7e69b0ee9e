#include "scorer/json_reader.h"

#include <algorithm>
#include <sstream>

namespace scorer {
namespace json_in {
namespace {

// One step of a field's path: a member's key or an element's index.
struct Step {
  std::string key;
  size_t index = 0;
  bool is_index = false;
};

// "shapes[3].replicates[0].baseline_us" -> shapes, [3], replicates, [0], baseline_us.
std::vector<Step> steps_of(const std::string& path) {
  std::vector<Step> out;
  std::string key;
  for (size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == '.' || c == '[') {
      if (!key.empty()) out.push_back({key});
      key.clear();
      if (c == '[') {
        const size_t close = path.find(']', i);
        if (close == std::string::npos) return out;
        out.push_back({"", size_t(std::strtoull(path.c_str() + i + 1, nullptr, 10)), true});
        i = close;
      }
    } else {
      key += c;
    }
  }
  if (!key.empty()) out.push_back({key});
  return out;
}

// nlohmann-json keeps no source positions, so an error finds its line by
// replaying the text through nlohmann's SAX parser from a string stream: the
// stream's read position at each event is where the lexer stands, which is
// just past a key's closing quote or an object's or array's opening bracket
// (scalars are not used: the lexer reads one character past a number).
//
// Linear in the text: each open container keeps one frame (its last key or
// next index, and whether its path is a prefix of the target), never its
// whole path, and the line is counted once, at the end.
class Locator : public nlohmann::json_sax<json> {
 public:
  Locator(const std::string& text, const std::string& target) : in_(text), target_(steps_of(target)) {}

  // Replays the text; afterwards `offset` is where `target` (or, when it is
  // absent, the deepest object or array that would hold it) begins, and
  // error_at where a syntax error stopped the replay (0: none).
  void run() { json::sax_parse(in_, this); }
  size_t offset = 0;
  size_t error_at = 0;

  // The path being read, for a syntax error: the open containers and the
  // last key; a very deep one keeps its last 120 characters.
  std::string field() const {
    std::string f;
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Frame& fr = stack_[i];
      if (fr.array) {
        if (i + 1 < stack_.size()) f += "[" + std::to_string(fr.next - 1) + "]";
      } else if (!fr.key.empty()) {
        f += (f.empty() ? "" : ".") + fr.key;
      }
    }
    return f.size() > 120 ? "..." + f.substr(f.size() - 117) : f;
  }

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t) override { return scalar(); }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool string(string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return scalar(); }
  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    f.key = k;
    const size_t depth = stack_.size() - 1;
    f.key_matches = f.matches && depth < target_.size() && !target_[depth].is_index && target_[depth].key == k;
    return !f.key_matches || visit(depth + 1);
  }
  // position counts the offending character itself; a number beyond a
  // double (out_of_range 406) stops the replay here too.
  bool parse_error(std::size_t position, const std::string&, const json::exception&) override {
    error_at = position;
    return false;
  }

 private:
  struct Frame {
    bool array = false;
    bool matches = false;      // its path is the target's first (depth) steps
    bool key_matches = false;  // ... and so is the path of its current member
    size_t next = 0;           // an array's next index
    std::string key;           // an object's current key
  };
  std::istringstream in_;
  std::vector<Step> target_;
  std::vector<Frame> stack_;

  bool scalar() {
    if (!stack_.empty() && stack_.back().array) ++stack_.back().next;
    return true;
  }
  bool open(bool array) {
    bool matches = stack_.empty();  // the top level: the empty path
    if (!stack_.empty()) {
      Frame& parent = stack_.back();
      const size_t depth = stack_.size() - 1;
      if (parent.array) {
        matches =
            parent.matches && depth < target_.size() && target_[depth].is_index && target_[depth].index == parent.next;
        ++parent.next;
      } else {
        matches = parent.key_matches;
      }
    }
    Frame f;
    f.array = array;
    f.matches = matches;
    stack_.push_back(std::move(f));
    return !matches || visit(stack_.size() - 1);
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
  // Records where a prefix of the target of `depth` steps begins; stops the
  // replay at the whole target.
  bool visit(size_t depth) {
    offset = size_t(in_.rdbuf()->pubseekoff(0, std::ios_base::cur, std::ios_base::in));
    return depth != target_.size() || target_.empty();
  }
};

int line_at(const std::string& text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + int(std::count(text.begin(), text.begin() + long(offset), '\n'));
}

// nlohmann's message without its own position, which counts lines its way:
// "[json.exception.parse_error.101] parse error at line 3, column 3: <reason>".
// A number beyond a double: "[json.exception.out_of_range.406] number
// overflow parsing '1e999'".
std::string syntax_reason(const std::string& what) {
  const size_t col = what.find(", column ");
  const size_t colon = col == std::string::npos ? col : what.find(": ", col);
  const size_t bracket = what.rfind("] ", what.find(' '));
  const std::string reason = colon != std::string::npos     ? what.substr(colon + 2)
                             : bracket != std::string::npos ? what.substr(bracket + 2)
                                                            : what;
  return reason.rfind("syntax error", 0) == 0 ? reason : "syntax error: " + reason;
}

}  // namespace

std::string member_path(const std::string& at, const std::string& key) { return at.empty() ? key : at + "." + key; }

void Reader::fail(const std::string& field, const std::string& msg) const {
  std::string where = path_;
  if (!text_.empty()) {
    Locator loc(text_, field);
    loc.run();
    where += ":" + std::to_string(line_at(text_, loc.offset));
  }
  throw InputError(where + ": field '" + field + "': " + msg);
}

void fail_syntax(const std::string& text, const std::string& path, const std::string& what) {
  Locator loc(text, "");
  loc.run();
  const int line = line_at(text, loc.error_at ? loc.error_at - 1 : 0);
  const std::string field = loc.field();
  throw InputError(path + ":" + std::to_string(line) + ": " + (field.empty() ? "" : "field '" + field + "': ") +
                   syntax_reason(what));
}

void check_times(Obj& o, const char* key, const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!(v[i] >= kMinTimeUs && v[i] <= kMaxTimeUs))
      o.fail(key, "trial " + std::to_string(i + 1) + " is " + json(v[i]).dump() +
                      ": a time is a number of µs in [0.001, 1e11]");
}

void check_durations(Obj& o, const char* key, const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!(v[i] >= 0 && v[i] <= kMaxTimeUs))
      o.fail(key, "value " + std::to_string(i + 1) + " is " + json(v[i]).dump() +
                      ": a duration is a number of µs in [0, 1e11]");
}

}  // namespace json_in
}  // namespace scorer
