#include "datatools/natural_order.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace brook::datatools {
namespace {

using ::testing::ElementsAre;

TEST(NaturalOrderTest, NumbersInNamesSortByValue) {
  std::vector<std::string> names = {"C10", "C2", "I1", "C1", "label", "C11", "C9", "I13", "I2"};
  std::sort(names.begin(), names.end(), NaturalLessFn());
  EXPECT_THAT(names, ElementsAre("C1", "C2", "C9", "C10", "C11", "I1", "I2", "I13", "label"));
}

TEST(NaturalOrderTest, IsAStrictTotalOrder) {
  EXPECT_FALSE(NaturalLess("C1", "C1"));
  // Equal as numbers, still distinct names: byte order breaks the tie.
  EXPECT_TRUE(NaturalLess("C01", "C1"));
  EXPECT_FALSE(NaturalLess("C1", "C01"));
  EXPECT_TRUE(NaturalLess("C", "C1"));
  EXPECT_TRUE(NaturalLess("x9y", "x10"));
  EXPECT_TRUE(NaturalLess("a2b", "a2c"));
  EXPECT_TRUE(NaturalLess("", "a"));
  // Longer digit runs than any integer type still compare.
  EXPECT_TRUE(NaturalLess("f99999999999999999999", "f100000000000000000000"));
}

}  // namespace
}  // namespace brook::datatools
