// Reading YAML maps field by field: each error names where it is and its
// line, and unknown or repeated keys are errors, so a typo is never silently
// ignored:
//
//   optimizer.embedding.learning_rate (line 12): must be a finite number > 0, got "-1"
//   feature "I1" (line 3): unknown key "lenght"; allowed here: name, type, ...
//
// Every YAML reader uses it: job specs (chief/job), feature specs (features/),
// model specs (trainer/model) and the data tools' schemas (datatools/).
// yaml-cpp throws on syntax errors and on some conversions; callers run the
// whole parse under NoThrow().
#pragma once

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "yaml-cpp/yaml.h"

namespace brook::yaml {

// The node's 1-based line, or 0 when yaml-cpp does not know it.
int LineOf(const YAML::Node& n);
// `"text"` for a scalar, else "a list" / "a map" / "nothing".
std::string Describe(const YAML::Node& n);
// " (line N)", or "" when line is 0.
std::string LineSuffix(int line);
// InvalidArgument "<where> (line N): <msg>" (no line part when line is 0).
absl::Status FieldError(std::string_view where, int line, std::string_view msg);
// What a parse that threw says: "<where> (line N): invalid YAML: ...", with
// the line of a YAML::Exception's mark.
absl::Status InvalidYaml(std::string_view where, const std::exception& e);

// The one YAML document of `text` (a null node when it has none). Throws a
// YAML::Exception at the second document's line when there are more: every
// spec is one document, and a second (after `---`) must not be dropped
// silently. Call it under NoThrow.
YAML::Node LoadDocument(const std::string& text);

// parse() (which returns a Status or StatusOr), with any exception it throws
// turned into InvalidYaml(where, ...): no exception leaves a spec's parser.
template <typename Parse>
auto NoThrow(std::string_view where, Parse&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const std::exception& e) {
    return InvalidYaml(where, e);
  }
}

// Sets *out to the value whose name is the scalar `n`; false, *out unchanged,
// when `n` names none of `choices`.
template <typename E>
bool ParseChoice(const YAML::Node& n, std::initializer_list<std::pair<std::string_view, E>> choices,
                 E* out) {
  if (!n.IsScalar()) return false;
  for (const auto& [name, value] : choices) {
    if (n.Scalar() == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

// One YAML map. Thread-compatible; borrows nothing (yaml-cpp nodes share their
// document). Check() first: the other methods read what it recorded.
class MapReader {
 public:
  // A map at a dotted `path` ("" for a document's root): an error at a key
  // names the key's path ("training.epochs"), an error at the map names the
  // map's path, or `root_name` ("job spec") for the root.
  MapReader(YAML::Node node, std::string path, std::string root_name = "");
  // A map known by a name rather than a path (`feature "I1"`, an entry of a
  // list): every error names it, and those about one key quote the key.
  static MapReader Named(YAML::Node node, std::string name);

  // The node must be a map whose keys are all in `allowed`, none twice.
  // `example` shows a valid value in the message when it is not a map.
  absl::Status Check(absl::Span<const std::string_view> allowed, std::string_view example);

  bool Has(const std::string& key) const { return lines_.count(key) > 0; }
  YAML::Node Get(const std::string& key) const { return node_[key]; }
  int line() const { return LineOf(node_); }
  // The line of `key`, or the map's line when it is absent.
  int KeyLine(const std::string& key) const;
  // What an error at `key` names: its dotted path, or the map's name.
  std::string Path(const std::string& key) const;
  const YAML::Node& node() const { return node_; }

  // An error at `key` (its line when present, else the map's line).
  absl::Status Error(const std::string& key, std::string_view msg) const;
  // An error at the map itself.
  absl::Status MapError(std::string_view msg) const;
  // "missing; <what>" at the key's path, or "missing \"key\"; <what>" for a
  // named map; `what` says what to give (empty: nothing more).
  absl::Status Missing(const std::string& key, std::string_view what) const;

  // Each reader leaves *out unchanged when the key is absent (the default
  // stays) and returns an error when it is present but not allowed.
  absl::Status Int(const std::string& key, int64_t min, int64_t max, int64_t* out) const;
  absl::Status Int(const std::string& key, int min, int max, int* out) const;
  absl::Status Uint(const std::string& key, uint64_t* out) const;
  // Finite numbers in [min, max]; `min_exclusive` makes the lower bound open.
  absl::Status Double(const std::string& key, double min, double max, bool min_exclusive,
                      double* out) const;
  absl::Status Float(const std::string& key, double min, double max, bool min_exclusive,
                     float* out) const;
  absl::Status String(const std::string& key, std::string* out) const;
  // Calls read(item, index) for each entry of the list at `key`, stopping at
  // the first error; an absent key or an empty value (`key:`) has none.
  template <typename Fn>
  absl::Status ForEachItem(const std::string& key, Fn&& read) const {
    if (!Has(key) || Get(key).IsNull()) return absl::OkStatus();
    const YAML::Node list = Get(key);
    if (!list.IsSequence()) return ValueError(key, "must be a list, got " + Describe(list));
    for (size_t i = 0; i < list.size(); ++i) {
      absl::Status s = read(list[i], i);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // One of `choices` (by name), listed in the error: "must be one of a, b".
  template <typename E>
  absl::Status Choice(const std::string& key,
                      std::initializer_list<std::pair<std::string_view, E>> choices, E* out) const {
    if (!Has(key) || ParseChoice(Get(key), choices, out)) return absl::OkStatus();
    return ValueError(key, "must be one of " + Names(choices) + ", got " + Describe(Get(key)));
  }
  // The same in the feature and model specs' words: "unknown <noun> "x";
  // allowed: a, b", where the noun says what the value is ("model type").
  template <typename E>
  absl::Status Choice(const std::string& key, std::string_view noun,
                      std::initializer_list<std::pair<std::string_view, E>> choices, E* out) const {
    if (!Has(key) || ParseChoice(Get(key), choices, out)) return absl::OkStatus();
    return Error(key, "unknown " + std::string(noun) + " " + Describe(Get(key)) +
                          "; allowed: " + Names(choices));
  }

 private:
  MapReader(YAML::Node node, std::string path, std::string name, bool named);
  // A typed reader's error: "must be ..." about `key`, which a named map's
  // message has to say.
  absl::Status ValueError(const std::string& key, std::string_view must) const;
  template <typename E>
  static std::string Names(std::initializer_list<std::pair<std::string_view, E>> choices) {
    std::string names;
    for (const auto& choice : choices) {
      names += names.empty() ? std::string(choice.first) : ", " + std::string(choice.first);
    }
    return names;
  }

  const YAML::Node node_;
  const std::string path_;  // dotted; unused when named_
  const std::string name_;  // what errors at the map name
  const bool named_;
  std::map<std::string, int> lines_;  // key -> line, filled by Check()
};

}  // namespace brook::yaml
