#include "trainer/lr_schedule.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace brook::trainer {
namespace {

using ::testing::HasSubstr;

TEST(LrScheduleTest, ConstantIsOneEverywhere) {
  LrSchedule s;
  ASSERT_TRUE(s.Validate().ok());
  for (int64_t step : {0, 1, 1000, 1000000}) EXPECT_EQ(s.Scale(step), 1.0f) << step;
}

TEST(LrScheduleTest, WarmupRampsLinearlyToOne) {
  LrSchedule s;
  s.warmup_steps = 4;
  EXPECT_FLOAT_EQ(s.Scale(0), 0.25f);
  EXPECT_FLOAT_EQ(s.Scale(1), 0.5f);
  EXPECT_FLOAT_EQ(s.Scale(2), 0.75f);
  EXPECT_FLOAT_EQ(s.Scale(3), 1.0f);
  EXPECT_FLOAT_EQ(s.Scale(100), 1.0f);
}

TEST(LrScheduleTest, LinearDecayStartsAfterWarmupAndStopsAtTheFloor) {
  LrSchedule s;
  s.warmup_steps = 2;
  s.decay = LrDecay::kLinear;
  s.decay_steps = 10;
  s.min_scale = 0.1;
  ASSERT_TRUE(s.Validate().ok());
  EXPECT_FLOAT_EQ(s.Scale(0), 0.5f);
  EXPECT_FLOAT_EQ(s.Scale(2), 1.0f);                // t = 0
  EXPECT_FLOAT_EQ(s.Scale(7), 1.0f - 0.9f * 0.5f);  // t = 5
  EXPECT_FLOAT_EQ(s.Scale(12), 0.1f);               // t = 10
  EXPECT_FLOAT_EQ(s.Scale(5000), 0.1f);
}

TEST(LrScheduleTest, CosineDecayFollowsTheHalfCosine) {
  LrSchedule s;
  s.decay = LrDecay::kCosine;
  s.decay_steps = 100;
  s.min_scale = 0.0;
  EXPECT_FLOAT_EQ(s.Scale(0), 1.0f);
  EXPECT_NEAR(s.Scale(50), 0.5f, 1e-6);
  EXPECT_NEAR(s.Scale(25), 0.5 * (1 + std::cos(M_PI / 4)), 1e-6);
  // The floor never reaches 0: the PS refuses a zero scale.
  EXPECT_EQ(s.Scale(100), LrSchedule::kMinScale);
  EXPECT_EQ(s.Scale(1000), LrSchedule::kMinScale);
}

TEST(LrScheduleTest, ExponentialDecayIsContinuousAndFloored) {
  LrSchedule s;
  s.decay = LrDecay::kExponential;
  s.decay_steps = 10;
  s.decay_rate = 0.5;
  s.min_scale = 0.2;
  EXPECT_FLOAT_EQ(s.Scale(10), 0.5f);
  EXPECT_NEAR(s.Scale(5), std::sqrt(0.5), 1e-6);
  EXPECT_FLOAT_EQ(s.Scale(20), 0.25f);
  EXPECT_FLOAT_EQ(s.Scale(30), 0.2f);  // 0.125 floored
}

TEST(LrScheduleTest, InvalidSchedulesNameTheField) {
  LrSchedule s;
  s.warmup_steps = -1;
  EXPECT_THAT(s.Validate().message(), HasSubstr("warmup_steps"));
  s = LrSchedule{};
  s.decay = LrDecay::kCosine;
  EXPECT_THAT(s.Validate().message(), HasSubstr("decay_steps"));
  s.decay_steps = 10;
  s.min_scale = 1.5;
  EXPECT_THAT(s.Validate().message(), HasSubstr("min_scale"));
  s.min_scale = 0;
  s.decay = LrDecay::kExponential;
  s.decay_rate = 0;
  EXPECT_THAT(s.Validate().message(), HasSubstr("decay_rate"));
  EXPECT_THAT(ParseLrDecay("step").status().message(), HasSubstr("'step'"));
  for (LrDecay d :
       {LrDecay::kConstant, LrDecay::kLinear, LrDecay::kCosine, LrDecay::kExponential}) {
    EXPECT_EQ(ParseLrDecay(LrDecayName(d)).value(), d);
  }
}

}  // namespace
}  // namespace brook::trainer
