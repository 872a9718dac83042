#include "datatools/natural_order.h"

#include <cstddef>

namespace brook::datatools {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool NaturalLess(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (IsDigit(a[i]) && IsDigit(b[j])) {
      size_t ia = i, jb = j;
      while (ia < a.size() && a[ia] == '0') ++ia;
      while (jb < b.size() && b[jb] == '0') ++jb;
      size_t ea = ia, eb = jb;
      while (ea < a.size() && IsDigit(a[ea])) ++ea;
      while (eb < b.size() && IsDigit(b[eb])) ++eb;
      // More significant digits is the larger number; else compare digits.
      if (ea - ia != eb - jb) return ea - ia < eb - jb;
      const int c = a.substr(ia, ea - ia).compare(b.substr(jb, eb - jb));
      if (c != 0) return c < 0;
      i = ea;
      j = eb;
      continue;
    }
    if (a[i] != b[j]) {
      return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
    }
    ++i;
    ++j;
  }
  if ((i < a.size()) != (j < b.size())) return j < b.size();  // a prefix first
  return a < b;
}

}  // namespace brook::datatools
