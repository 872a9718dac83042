// Examples/s of the input pipeline alone vs. the bare parse rate (one thread
// reading and parsing the same file), on a generated Criteo-shaped file.
// Disabled by default; run with
//   brook_trainer_tests --gtest_filter='PipelineBenchmark.*' --gtest_also_run_disabled_tests
// Prints a table; asserts only that every example arrived.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "datatools/example_builder.h"
#include "gtest/gtest.h"
#include "storage/tfrecord.h"
#include "tests/testing/test_util.h"
#include "trainer/input/example_parser.h"
#include "trainer/input/pipeline.h"

namespace brook::input {
namespace {

constexpr int kExamples = 200'000;
constexpr int kBatch = 256;

FeatureSpec CriteoShapedSpec() {
  FeatureSpec spec;
  spec.label_name = "label";
  for (int i = 1; i <= 13; ++i) {
    spec.features.push_back({.name = "I" + std::to_string(i), .type = FeatureType::kFloat});
  }
  for (int i = 1; i <= 26; ++i) {
    spec.features.push_back({.name = "C" + std::to_string(i),
                             .type = FeatureType::kInt64,
                             .kind = FeatureKind::kVarLen});
  }
  return spec;
}

void WriteCriteoShaped(const std::string& path) {
  auto writer = storage::TFRecordWriter::Open(path, {});
  ASSERT_TRUE(writer.ok());
  datatools::ExampleBuilder b;
  uint64_t x = 1;
  for (int i = 0; i < kExamples; ++i) {
    b.Clear();
    const float label = static_cast<float>(i % 4 == 0);
    b.AddFloats("label", std::span<const float>(&label, 1));
    for (int f = 1; f <= 13; ++f) {
      const float v = static_cast<float>((x = x * 6364136223846793005ull + 1) >> 54);
      b.AddFloats("I" + std::to_string(f), std::span<const float>(&v, 1));
    }
    for (int f = 1; f <= 26; ++f) {
      const int64_t id = static_cast<int64_t>((x = x * 6364136223846793005ull + 1) >> 40);
      b.AddInt64s("C" + std::to_string(f), std::span<const int64_t>(&id, 1));
    }
    ASSERT_TRUE((*writer)->Write(b.Serialize()).ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(PipelineBenchmark, DISABLED_ExamplesPerSecondVsBareParse) {
  brook::testing::TempDir dir;
  const std::string path = dir.Join("criteo_shaped.tfrecord");
  WriteCriteoShaped(path);
  const FeatureSpec spec = CriteoShapedSpec();

  {  // Bare: one thread, read + parse into reused batches.
    ExampleParser parser = ExampleParser::Create(spec).value();
    ColumnarBatch batch;
    parser.InitBatch(&batch);
    auto start = std::chrono::steady_clock::now();
    auto reader = storage::TFRecordReader::Open(path, {}).value();
    std::string_view record;
    int n = 0;
    while (reader->Next(&record).value()) {
      ASSERT_TRUE(parser.Append(record, &batch, nullptr).ok());
      if (++n % kBatch == 0) batch.Clear();
    }
    ASSERT_EQ(n, kExamples);
    std::printf("%-40s %10.0f examples/s\n", "bare read+parse, 1 thread", n / Seconds(start));
  }
  struct Case {
    const char* name;
    int threads;
    size_t shuffle;
    int epochs;
    bool cache;
  };
  for (const Case& c : {Case{"pipeline, 1 parse thread", 1, 0, 1, false},
                        Case{"pipeline, 2 parse threads", 2, 0, 1, false},
                        Case{"pipeline, autotune", 0, 0, 1, false},
                        Case{"pipeline, 2 threads, shuffle 10k", 2, 10'000, 1, false},
                        Case{"pipeline, cache, epochs 2+3 (shuffled)", 2, 10'000, 3, true}}) {
    PipelineOptions o;
    o.files = {path};
    o.batch_size = kBatch;
    o.parse_threads = c.threads;
    o.shuffle_buffer = c.shuffle;
    o.epochs = c.epochs;
    o.cache = c.cache;
    auto p = Pipeline::Create(spec, o).value();
    uint64_t rows = 0, rows_timed = 0;
    auto start = std::chrono::steady_clock::now();
    while (true) {
      auto b = p->Next().value();
      if (!b.has_value()) break;
      if (c.cache && b->epoch() == 1 && rows_timed == 0) start = std::chrono::steady_clock::now();
      rows += b->data.num_rows;
      if (!c.cache || b->epoch() >= 1) rows_timed += b->data.num_rows;
    }
    ASSERT_EQ(rows, static_cast<uint64_t>(kExamples) * c.epochs);
    const PipelineStats s = p->stats();
    std::printf(
        "%-40s %10.0f examples/s  (parse threads %d, consumer waited %.2fs, parse busy %.2fs)\n",
        c.name, rows_timed / Seconds(start), s.parse_threads, s.consumer.wait_input_seconds,
        s.parse.busy_seconds);
  }
}

}  // namespace
}  // namespace brook::input
