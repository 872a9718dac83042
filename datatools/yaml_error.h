// The error of a bad YAML schema field, with its line when yaml-cpp knows it.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"
#include "yaml-cpp/yaml.h"

namespace brook::datatools {

inline absl::Status YamlError(const YAML::Node& node, std::string_view what) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return absl::InvalidArgumentError(std::string(what));
  return absl::InvalidArgumentError(absl::StrCat("line ", mark.line + 1, ": ", AbslView(what)));
}

}  // namespace brook::datatools
