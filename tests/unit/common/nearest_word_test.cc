#include "common/nearest_word.h"

#include <gtest/gtest.h>

namespace brook {
namespace {

TEST(NearestWordTest, EditDistanceCountsASwapOfNeighboursAsOne) {
  EXPECT_EQ(EditDistance("inspect", "inspect"), 0u);
  EXPECT_EQ(EditDistance("inpsect", "inspect"), 1u);
  EXPECT_EQ(EditDistance("--chife", "--chief"), 1u);
  EXPECT_EQ(EditDistance("serv", "serve"), 1u);
  EXPECT_EQ(EditDistance("", "ps"), 2u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(NearestWordTest, SuggestsOnlyAWordNearEnoughToBeATypo) {
  const std::vector<std::string> commands = {"data", "bench", "ps", "trainer", "submit", "status"};
  EXPECT_EQ(NearestWord("trainr", commands), "trainer");
  EXPECT_EQ(NearestWord("stauts", commands), "status");
  EXPECT_EQ(NearestWord("serve", commands), "");  // nothing like it
  EXPECT_EQ(NearestWord("p", commands), "ps");
  EXPECT_EQ(NearestWord("x", {}), "");
}

}  // namespace
}  // namespace brook
