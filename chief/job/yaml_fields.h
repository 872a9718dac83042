// Reading one YAML map field by field, each error naming the field's dotted
// path and YAML line and saying what is allowed:
//
//   optimizer.embedding.learning_rate (line 12): must be a number > 0, got "-1"
//
// Internal to chief/job. yaml-cpp may throw on conversions; callers wrap the
// whole parse in a catch (JobSpec::FromYaml does).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "yaml-cpp/yaml.h"

namespace brook::chief::internal {

int LineOf(const YAML::Node& n);
// `"text"` for a scalar, else "a list" / "a map".
std::string Describe(const YAML::Node& n);
// InvalidArgument "<path> (line N): <msg>" (no line part when line is 0).
absl::Status FieldError(std::string_view path, int line, std::string_view msg);

// Thread-compatible; borrows nothing (yaml-cpp nodes share their document).
class MapReader {
 public:
  // `path` is the map's own path ("" for the document root).
  MapReader(YAML::Node node, std::string path);

  // The node must be a map whose keys are all in `allowed`, none twice.
  // `example` shows a valid value in the message when it is not a map.
  absl::Status Check(std::initializer_list<std::string_view> allowed, std::string_view example);

  bool Has(const std::string& key) const { return lines_.count(key) > 0; }
  YAML::Node Get(const std::string& key) const { return node_[key]; }
  int line() const { return LineOf(node_); }
  int KeyLine(const std::string& key) const;
  std::string Path(const std::string& key) const;
  const YAML::Node& node() const { return node_; }

  // An error at `key` (its line when present, else the map's line).
  absl::Status Error(const std::string& key, std::string_view msg) const;
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
  // One of `choices` (by name), listed in the error.
  template <typename E>
  absl::Status Choice(const std::string& key,
                      std::initializer_list<std::pair<std::string_view, E>> choices, E* out) const {
    if (!Has(key)) return absl::OkStatus();
    const YAML::Node v = Get(key);
    std::string names;
    for (const auto& [name, value] : choices) {
      if (v.IsScalar() && v.Scalar() == name) {
        *out = value;
        return absl::OkStatus();
      }
      names += names.empty() ? std::string(name) : ", " + std::string(name);
    }
    return Error(key, "must be one of " + names + ", got " + Describe(v));
  }

 private:
  const YAML::Node node_;
  const std::string path_;
  std::map<std::string, int> lines_;  // key -> line, filled by Check()
};

}  // namespace brook::chief::internal
