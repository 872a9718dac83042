#include "bench/soak.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace brook::bench {
namespace {

using ::testing::HasSubstr;

// 20 samples over 100 s; `shape` sets each one's figures.
template <typename Shape>
std::vector<SoakSample> Samples(Shape shape) {
  std::vector<SoakSample> samples;
  for (int i = 1; i <= 20; ++i) {
    SoakSample s;
    s.seconds = 5.0 * i;
    s.load_rows_per_second = 1e6;
    s.train_examples_per_second = 5e4;
    s.rss_bytes = {{"ps-0", 500e6}, {"trainer-0", 300e6}};
    shape(i, &s);
    samples.push_back(s);
  }
  return samples;
}

TEST(SoakVerdictTest, ASteadyRunPassesAndWarmUpGrowthIsForgiven) {
  // Memory grows during the warm-up (first 25 s), then stays.
  const SoakVerdict v = JudgeSoak(Samples([](int i, SoakSample* s) {
                                    if (i <= 5) s->rss_bytes["ps-0"] = 100e6 * i;
                                    s->load_rows_per_second = i % 2 ? 0.9e6 : 1.1e6;  // noise
                                  }),
                                  {});
  EXPECT_TRUE(v.pass) << ::testing::PrintToString(v.failures);
  EXPECT_NEAR(v.load_early, 1e6, 1e5);
  EXPECT_DOUBLE_EQ(v.rss.at("ps-0").first, 500e6);
}

TEST(SoakVerdictTest, FallingThroughputFailsNamingWhatFell) {
  const SoakVerdict v = JudgeSoak(Samples([](int i, SoakSample* s) {
                                    if (i > 13) s->train_examples_per_second = 2e4;
                                  }),
                                  {});
  EXPECT_FALSE(v.pass);
  ASSERT_EQ(v.failures.size(), 1u);
  EXPECT_THAT(v.failures[0], HasSubstr("training throughput fell"));
}

TEST(SoakVerdictTest, MemoryGrowingAfterWarmUpFailsNamingTheProcess) {
  const SoakVerdict v = JudgeSoak(Samples([](int i, SoakSample* s) {
                                    s->rss_bytes["trainer-0"] = 300e6 + 20e6 * i;  // a leak
                                  }),
                                  {});
  EXPECT_FALSE(v.pass);
  ASSERT_EQ(v.failures.size(), 1u);
  EXPECT_THAT(v.failures[0], HasSubstr("trainer-0 RSS grew"));
}

TEST(SoakVerdictTest, AnyErrorOrTooFewSamplesFails) {
  const SoakVerdict errors =
      JudgeSoak(Samples([](int i, SoakSample* s) { s->errors = i > 18 ? 1 : 0; }), {});
  EXPECT_FALSE(errors.pass);
  EXPECT_THAT(errors.failures.back(), HasSubstr("1 errors"));
  std::vector<SoakSample> few(3);
  EXPECT_FALSE(JudgeSoak(few, {}).pass);
  const SoakVerdict idle =
      JudgeSoak(Samples([](int, SoakSample* s) { s->load_rows_per_second = 0; }), {});
  EXPECT_FALSE(idle.pass);
  EXPECT_THAT(idle.failures[0], HasSubstr("load: no throughput"));
}

}  // namespace
}  // namespace brook::bench
