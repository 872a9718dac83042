// Debian's abseil is built with its own absl::string_view (not an alias of
// std::string_view), so StrCat, StrSplit and friends need it spelled out.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace brook {

inline absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace brook
