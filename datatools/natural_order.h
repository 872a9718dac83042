// Natural order of feature names: digit runs compare as numbers, so C2 comes
// before C10 (plain byte order puts C10, C11, ... first). What `brook data
// inspect`, `stats` and `spec` list features in.
#pragma once

#include <string_view>

namespace brook::datatools {

// A strict total order: runs of digits compare by value (leading zeros
// ignored), everything else byte by byte; names equal that way ("C01" and
// "C1") fall back to byte order, so only equal strings are equivalent.
bool NaturalLess(std::string_view a, std::string_view b);

struct NaturalLessFn {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return NaturalLess(a, b); }
};

}  // namespace brook::datatools
