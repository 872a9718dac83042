// Test data for the input pipeline: TFRecord files of tf.train.Examples whose
// "id" feature is unique across files (id = file * 1000 + record index), so a
// test can tell exactly which records a batch holds.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "datatools/example_builder.h"
#include "features/feature_spec.h"
#include "gtest/gtest.h"
#include "storage/tfrecord.h"
#include "trainer/input/pipeline.h"

namespace brook::input::testing {

inline constexpr int64_t kIdsPerFile = 1000;

// label (float), id (int64, fixed 1), f (float, fixed 2), tags (int64 varlen,
// id % 4 values): fixed and ragged columns, so re-batching is exercised.
inline FeatureSpec IdSpec() {
  FeatureSpec spec;
  spec.label_name = "label";
  spec.features.push_back({.name = "id", .type = FeatureType::kInt64, .kind = FeatureKind::kFixed});
  spec.features.push_back(
      {.name = "f", .type = FeatureType::kFloat, .kind = FeatureKind::kFixed, .length = 2});
  spec.features.push_back(
      {.name = "tags", .type = FeatureType::kInt64, .kind = FeatureKind::kVarLen});
  return spec;
}

inline std::string IdExample(datatools::ExampleBuilder* b, int64_t id) {
  b->Clear();
  const float label = static_cast<float>(id % 2);
  b->AddFloats("label", std::span<const float>(&label, 1));
  b->AddInt64s("id", std::span<const int64_t>(&id, 1));
  const float f[2] = {static_cast<float>(id), -static_cast<float>(id)};
  b->AddFloats("f", f);
  std::vector<int64_t> tags;
  for (int64_t t = 0; t < id % 4; ++t) tags.push_back(id * 10 + t);
  b->AddInt64s("tags", tags);
  return std::string(b->Serialize());
}

// Writes records; `records[i]` nullopt writes example id file*1000+i.
inline void WriteRecords(const std::string& path, const std::vector<std::string>& records,
                         storage::Compression compression = storage::Compression::kNone) {
  auto writer = storage::TFRecordWriter::Open(path, {.compression = compression});
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const std::string& r : records) ASSERT_TRUE((*writer)->Write(r).ok());
  ASSERT_TRUE((*writer)->Close().ok());
}

inline std::vector<std::string> IdRecords(int file, int n) {
  datatools::ExampleBuilder b;
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(IdExample(&b, file * kIdsPerFile + i));
  return out;
}

inline void WriteIdFile(const std::string& path, int file, int n,
                        storage::Compression compression = storage::Compression::kNone) {
  WriteRecords(path, IdRecords(file, n), compression);
}

// The "id" column of a batch of IdSpec.
inline std::vector<int64_t> Ids(const Batch& batch) { return batch.data.columns[0].int64s; }

// Checks that every row of `batch` is consistent with its id (re-batching
// kept the columns aligned).
inline void ExpectRowsConsistent(const Batch& batch) {
  const ColumnarBatch& d = batch.data;
  ASSERT_EQ(d.columns.size(), 3u);
  ASSERT_EQ(d.columns[0].int64s.size(), d.num_rows);
  ASSERT_EQ(d.labels.size(), d.num_rows);
  ASSERT_EQ(d.columns[1].floats.size(), 2 * d.num_rows);
  ASSERT_EQ(d.columns[2].row_splits.size(), d.num_rows + 1);
  for (size_t r = 0; r < d.num_rows; ++r) {
    const int64_t id = d.columns[0].int64s[r];
    EXPECT_EQ(d.labels[r], static_cast<float>(id % 2));
    EXPECT_EQ(d.columns[1].floats[2 * r], static_cast<float>(id));
    const uint32_t b = d.columns[2].row_splits[r], e = d.columns[2].row_splits[r + 1];
    ASSERT_EQ(e - b, static_cast<uint32_t>(id % 4)) << "id " << id;
    for (uint32_t t = b; t < e; ++t) EXPECT_EQ(d.columns[2].ids[t], uint64_t(id * 10 + (t - b)));
  }
}

struct Drained {
  std::vector<Batch> batches;
  absl::Status status;  // OK when the stream ended cleanly
};

// Reads until the end, an error, or `max_batches`.
inline Drained Drain(Pipeline* p, size_t max_batches = SIZE_MAX) {
  Drained d;
  while (d.batches.size() < max_batches) {
    absl::StatusOr<std::optional<Batch>> b = p->Next();
    if (!b.ok()) {
      d.status = b.status();
      break;
    }
    if (!b->has_value()) break;
    d.batches.push_back(std::move(**b));
  }
  return d;
}

// All ids of the batches of one epoch, in order.
inline std::vector<int64_t> EpochIds(const std::vector<Batch>& batches, int epoch) {
  std::vector<int64_t> ids;
  for (const Batch& b : batches) {
    if (b.epoch() != epoch) continue;
    std::vector<int64_t> v = Ids(b);
    ids.insert(ids.end(), v.begin(), v.end());
  }
  return ids;
}

}  // namespace brook::input::testing
