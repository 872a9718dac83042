#include "ps/options.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace brook::ps {
namespace {

TableOptions GoodTable() {
  TableOptions t;
  t.name = "emb";
  t.dim = 8;
  return t;
}

struct BadTableCase {
  std::string field;  // must appear in the error message
  std::function<void(TableOptions&)> mutate;
};

TEST(TableOptionsTest, DefaultsWithNameAndDimAreValid) {
  EXPECT_TRUE(GoodTable().Validate().ok()) << GoodTable().Validate();
  for (auto kind :
       {OptimizerKind::kSgd, OptimizerKind::kAdagrad, OptimizerKind::kAdam, OptimizerKind::kFtrl}) {
    TableOptions t = GoodTable();
    t.optimizer.kind = kind;
    EXPECT_TRUE(t.Validate().ok()) << t.Validate();
  }
  for (auto kind : {InitializerKind::kZeros, InitializerKind::kConstant, InitializerKind::kUniform,
                    InitializerKind::kTruncatedNormal}) {
    TableOptions t = GoodTable();
    t.initializer.kind = kind;
    EXPECT_TRUE(t.Validate().ok()) << t.Validate();
  }
}

TEST(TableOptionsTest, EachBadFieldIsNamed) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<BadTableCase> cases = {
      {"name", [](TableOptions& t) { t.name.clear(); }},
      {"dim", [](TableOptions& t) { t.dim = 0; }},
      {"dim", [](TableOptions& t) { t.dim = -3; }},
      {"dim", [](TableOptions& t) { t.dim = kMaxDim + 1; }},
      {"initializer.high",
       [](TableOptions& t) {
         t.initializer.kind = InitializerKind::kUniform;
         t.initializer.low = 1;
         t.initializer.high = 1;
       }},
      {"initializer.low",
       [nan](TableOptions& t) {
         t.initializer.kind = InitializerKind::kUniform;
         t.initializer.low = nan;
       }},
      {"initializer.stddev",
       [](TableOptions& t) {
         t.initializer.kind = InitializerKind::kTruncatedNormal;
         t.initializer.stddev = 0;
       }},
      {"initializer.mean",
       [](TableOptions& t) {
         t.initializer.kind = InitializerKind::kTruncatedNormal;
         t.initializer.mean = std::numeric_limits<float>::infinity();
       }},
      {"initializer.value",
       [nan](TableOptions& t) {
         t.initializer.kind = InitializerKind::kConstant;
         t.initializer.value = nan;
       }},
      {"initializer.kind",
       [](TableOptions& t) { t.initializer.kind = static_cast<InitializerKind>(42); }},
      {"optimizer.learning_rate", [](TableOptions& t) { t.optimizer.learning_rate = 0; }},
      {"optimizer.learning_rate", [nan](TableOptions& t) { t.optimizer.learning_rate = nan; }},
      {"optimizer.kind", [](TableOptions& t) { t.optimizer.kind = static_cast<OptimizerKind>(9); }},
      {"optimizer.initial_accumulator",
       [](TableOptions& t) {
         t.optimizer.kind = OptimizerKind::kAdagrad;
         t.optimizer.initial_accumulator = -1;
       }},
      {"optimizer.initial_accumulator",
       [](TableOptions& t) {
         t.optimizer.kind = OptimizerKind::kAdagrad;
         t.optimizer.initial_accumulator = 0;
         t.optimizer.epsilon = 0;
       }},
      {"optimizer.epsilon",
       [](TableOptions& t) {
         t.optimizer.kind = OptimizerKind::kAdagrad;
         t.optimizer.epsilon = -1e-3f;
       }},
      {"optimizer.beta1",
       [](TableOptions& t) {
         t.optimizer.kind = OptimizerKind::kAdam;
         t.optimizer.beta1 = 1.0f;
       }},
      {"optimizer.beta2",
       [](TableOptions& t) {
         t.optimizer.kind = OptimizerKind::kAdam;
         t.optimizer.beta2 = -0.1f;
       }},
      {"optimizer.epsilon",
       [](TableOptions& t) {
         t.optimizer.kind = OptimizerKind::kAdam;
         t.optimizer.epsilon = 0;
       }},
      {"optimizer.l1",
       [](TableOptions& t) {
         t.optimizer.kind = OptimizerKind::kFtrl;
         t.optimizer.l1 = -1;
       }},
      {"optimizer.l2",
       [](TableOptions& t) {
         t.optimizer.kind = OptimizerKind::kFtrl;
         t.optimizer.l2 = -1;
       }},
      {"optimizer.l2_shrinkage",
       [](TableOptions& t) {
         t.optimizer.kind = OptimizerKind::kFtrl;
         t.optimizer.l2_shrinkage = -1;
       }},
      {"optimizer.lr_power",
       [](TableOptions& t) {
         t.optimizer.kind = OptimizerKind::kFtrl;
         t.optimizer.lr_power = 0.5f;
       }},
      {"optimizer.initial_accumulator",
       [](TableOptions& t) {
         t.optimizer.kind = OptimizerKind::kFtrl;
         t.optimizer.initial_accumulator = -0.1f;
       }},
      {"memory_budget_bytes", [](TableOptions& t) { t.memory_budget_bytes = 31; }},
      {"admission_min_count", [](TableOptions& t) { t.admission_min_count = 70000; }},
      {"max_pending_keys", [](TableOptions& t) { t.max_pending_keys = 0; }},
      {"ttl_steps", [](TableOptions& t) { t.ttl_steps = -1; }},
      {"ttl_seconds", [](TableOptions& t) { t.ttl_seconds = -0.5; }},
      {"ttl_seconds",
       [](TableOptions& t) { t.ttl_seconds = std::numeric_limits<double>::infinity(); }},
      {"bad_gradient", [](TableOptions& t) { t.bad_gradient = static_cast<BadGradientPolicy>(7); }},
      {"gradient_clip", [](TableOptions& t) { t.gradient_clip = -1; }},
      {"gradient_clip", [nan](TableOptions& t) { t.gradient_clip = nan; }},
  };
  for (const BadTableCase& c : cases) {
    TableOptions t = GoodTable();
    c.mutate(t);
    const absl::Status s = t.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field << ": " << s;
    EXPECT_NE(s.message().find(c.field), absl::string_view::npos)
        << "message should name " << c.field << ": " << s;
  }
}

TEST(TableOptionsTest, ErrorNamesTheTable) {
  TableOptions t = GoodTable();
  t.name = "user_emb";
  t.dim = 0;
  EXPECT_NE(t.Validate().message().find("user_emb"), absl::string_view::npos);
}

TEST(DenseOptionsTest, ValidatesShapeAndNamesFields) {
  DenseOptions d;
  d.name = "mlp/w0";
  d.shape = {4, 3};
  EXPECT_TRUE(d.Validate().ok()) << d.Validate();
  EXPECT_EQ(d.num_floats(), 12u);

  DenseOptions empty_name = d;
  empty_name.name.clear();
  EXPECT_NE(empty_name.Validate().message().find("name"), absl::string_view::npos);

  DenseOptions no_shape = d;
  no_shape.shape.clear();
  EXPECT_NE(no_shape.Validate().message().find("shape"), absl::string_view::npos);
  EXPECT_EQ(no_shape.num_floats(), 0u);

  DenseOptions zero_dim = d;
  zero_dim.shape = {4, 0};
  EXPECT_NE(zero_dim.Validate().message().find("shape"), absl::string_view::npos);

  DenseOptions huge = d;
  huge.shape = {1 << 20, 1 << 20, 1 << 20, 1 << 20};  // overflows uint64
  EXPECT_EQ(huge.num_floats(), 0u);
  EXPECT_EQ(huge.Validate().code(), absl::StatusCode::kInvalidArgument);

  DenseOptions bad_opt = d;
  bad_opt.optimizer.learning_rate = -1;
  EXPECT_NE(bad_opt.Validate().message().find("optimizer.learning_rate"), absl::string_view::npos);
}

TEST(OptimizerSlotFloatsTest, MatchesEachOptimizer) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  EXPECT_EQ(OptimizerSlotFloats(o, 16), 0);
  o.kind = OptimizerKind::kAdagrad;
  EXPECT_EQ(OptimizerSlotFloats(o, 16), 16);
  o.kind = OptimizerKind::kAdam;
  EXPECT_EQ(OptimizerSlotFloats(o, 16), 33);
  o.kind = OptimizerKind::kFtrl;
  EXPECT_EQ(OptimizerSlotFloats(o, 16), 32);
}

}  // namespace
}  // namespace brook::ps

namespace brook::ps {
namespace {

TEST(ParseByteSizeTest, ReadsBytesAndBinaryAndDecimalUnits) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"0", 0},
      {"1073741824", 1073741824},
      {"512MiB", 512ull << 20},
      {"2GiB", 2ull << 30},
      {"8Gi", 8ull << 30},
      {" 1 TiB ", 1ull << 40},
      {"64KiB", 64 << 10},
      {"1.5GiB", 3ull << 29},
      {"2GB", 2000000000},
      {"10M", 10000000},
      {"100B", 100},
  };
  for (const auto& [text, bytes] : cases) {
    const absl::StatusOr<uint64_t> got = ParseByteSize(text);
    ASSERT_TRUE(got.ok()) << text << ": " << got.status();
    EXPECT_EQ(*got, bytes) << text;
  }
}

TEST(ParseByteSizeTest, RefusesOtherSpellingsSayingWhatIsAllowed) {
  for (const char* text :
       {"", "GiB", "-1GiB", "2 gigabytes", "2gib", "1e3", "abc", "99999999TiB", "1.2.3MiB"}) {
    const absl::StatusOr<uint64_t> got = ParseByteSize(text);
    ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(got.status().message().find("is not a size"), std::string::npos) << got.status();
    EXPECT_NE(got.status().message().find("MiB"), std::string::npos) << got.status();
  }
}

}  // namespace
}  // namespace brook::ps
