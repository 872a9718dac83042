#include "ps/internal/wal_records.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "brook/v1/storage.pb.h"
#include "gtest/gtest.h"

namespace brook::ps::internal {
namespace {

// What the PS logged before the in-place encoder: the message, serialised.
std::string ProtobufBytes(const PushPart& part) {
  v1::WalEntry entry;
  v1::WalPushPart* p = entry.mutable_push_part();
  p->set_table(std::string(part.table));
  p->set_push_id(part.push_id);
  p->set_part(part.part);
  p->set_parts(part.parts);
  p->set_step(part.step);
  p->set_client_id(part.client_id);
  p->set_sequence(part.sequence);
  if (part.stream_id != 0) p->set_stream_id(part.stream_id);
  if (part.learning_rate_scale != 1.0f) p->set_learning_rate_scale(part.learning_rate_scale);
  p->set_keys(reinterpret_cast<const char*>(part.keys.data()), part.keys.size() * sizeof(uint64_t));
  const size_t row = static_cast<size_t>(part.dim) * sizeof(float);
  std::string* g = p->mutable_grads();
  g->resize(part.keys.size() * row);
  for (size_t j = 0; j < part.original.size(); ++j) {
    std::memcpy(g->data() + j * row, part.grads.data() + size_t{part.original[j]} * part.dim, row);
  }
  return entry.SerializeAsString();
}

std::string Encoded(const PushPart& part) {
  std::string out(WalPushPartBytes(part) + 8, '\xee');  // 8 guard bytes
  EncodeWalPushPart(part, out.data());
  EXPECT_EQ(out.substr(out.size() - 8), std::string(8, '\xee')) << "wrote past its size";
  out.resize(out.size() - 8);
  return out;
}

struct Request {
  std::vector<uint64_t> keys;      // the part's keys
  std::vector<uint32_t> original;  // their rows in the request
  std::vector<float> grads;        // the whole request's rows
};

// A request of `rows` rows of `dim`, of which the part takes every other one,
// backwards (so the gather's order matters).
Request MakeRequest(int rows, int dim) {
  Request r;
  for (int i = 0; i < rows * dim; ++i) r.grads.push_back(0.25f * static_cast<float>(i) - 3.0f);
  for (int i = rows - 1; i >= 0; i -= 2) {
    r.original.push_back(static_cast<uint32_t>(i));
    r.keys.push_back(uint64_t{0x9e3779b97f4a7c15} * static_cast<uint64_t>(i + 1));
  }
  return r;
}

PushPart PartOf(const Request& r, int dim) {
  PushPart part;
  part.table = "user/emb";
  part.push_id = 300;
  part.part = 2;
  part.parts = 7;
  part.step = 123456789;
  part.client_id = 42;
  part.sequence = 1u << 20;
  part.dim = dim;
  part.keys = r.keys;
  part.original = r.original;
  part.grads = r.grads;
  return part;
}

TEST(WalRecordsTest, PushPartIsTheBytesProtobufWrites) {
  const Request r = MakeRequest(9, 3);
  const PushPart part = PartOf(r, 3);
  EXPECT_EQ(Encoded(part), ProtobufBytes(part));
}

TEST(WalRecordsTest, EdgeValuesMatchProtobufToo) {
  const Request r = MakeRequest(300, 64);  // lengths past one varint byte
  PushPart part = PartOf(r, 64);
  // Defaults proto3 leaves out, a negative step (ten varint bytes), a scale
  // and a stream, the largest values.
  for (int variant = 0; variant < 6; ++variant) {
    SCOPED_TRACE(variant);
    switch (variant) {
      case 0:
        part.push_id = part.part = 0;
        part.client_id = part.sequence = 0;
        part.step = 0;
        break;
      case 1:
        part.step = -5;
        break;
      case 2:
        part.learning_rate_scale = 0.5f;
        part.stream_id = 77;
        break;
      case 3:
        part.push_id = part.client_id = part.sequence = part.stream_id =
            std::numeric_limits<uint64_t>::max();
        part.step = std::numeric_limits<int64_t>::min();
        part.parts = std::numeric_limits<uint32_t>::max();
        break;
      case 4:
        part.table = "";
        break;
      case 5:
        part.keys = {};
        part.original = {};
        break;
    }
    EXPECT_EQ(Encoded(part), ProtobufBytes(part));
  }
}

TEST(WalRecordsTest, ReplayParsesWhatWasLogged) {
  const Request r = MakeRequest(5, 2);
  PushPart part = PartOf(r, 2);
  part.learning_rate_scale = 2.0f;
  part.stream_id = 9;
  v1::WalEntry entry;
  ASSERT_TRUE(entry.ParseFromString(Encoded(part)));
  ASSERT_TRUE(entry.has_push_part());
  const v1::WalPushPart& p = entry.push_part();
  EXPECT_EQ(p.table(), "user/emb");
  EXPECT_EQ(p.push_id(), 300u);
  EXPECT_EQ(p.part(), 2u);
  EXPECT_EQ(p.parts(), 7u);
  EXPECT_EQ(p.step(), 123456789);
  EXPECT_EQ(p.client_id(), 42u);
  EXPECT_EQ(p.sequence(), 1u << 20);
  EXPECT_EQ(p.stream_id(), 9u);
  EXPECT_EQ(p.learning_rate_scale(), 2.0f);
  ASSERT_EQ(p.keys().size(), r.keys.size() * sizeof(uint64_t));
  EXPECT_EQ(std::memcmp(p.keys().data(), r.keys.data(), p.keys().size()), 0);
  // Rows 4, 2, 0 of the request, in that order.
  std::vector<float> grads(p.grads().size() / sizeof(float));
  std::memcpy(grads.data(), p.grads().data(), p.grads().size());
  EXPECT_EQ(grads, (std::vector<float>{r.grads[8], r.grads[9], r.grads[4], r.grads[5], r.grads[0],
                                       r.grads[1]}));
}

std::string ProtobufBytes(const DensePushRecord& push) {
  v1::WalEntry entry;
  v1::WalDensePush* d = entry.mutable_dense_push();
  d->set_name(std::string(push.name));
  d->set_step(push.step);
  d->set_client_id(push.client_id);
  d->set_sequence(push.sequence);
  if (push.stream_id != 0) d->set_stream_id(push.stream_id);
  if (push.learning_rate_scale != 1.0f) d->set_learning_rate_scale(push.learning_rate_scale);
  d->set_grads(reinterpret_cast<const char*>(push.grads.data()), push.grads.size() * sizeof(float));
  return entry.SerializeAsString();
}

std::string Encoded(const DensePushRecord& push) {
  std::string out(WalDensePushBytes(push) + 8, '\xee');
  EncodeWalDensePush(push, out.data());
  EXPECT_EQ(out.substr(out.size() - 8), std::string(8, '\xee')) << "wrote past its size";
  out.resize(out.size() - 8);
  return out;
}

TEST(WalRecordsTest, DensePushIsTheBytesProtobufWrites) {
  std::vector<float> grads(5000);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.001f * static_cast<float>(i) - 1.0f;
  DensePushRecord push{
      .name = "job/mlp/w0", .step = 77, .client_id = 3, .sequence = 999, .grads = grads};
  for (int variant = 0; variant < 5; ++variant) {
    SCOPED_TRACE(variant);
    switch (variant) {
      case 1:
        push.step = -1;
        push.learning_rate_scale = 0.25f;
        push.stream_id = 12345678901ull;
        break;
      case 2:
        push.client_id = push.sequence = 0;
        push.step = 0;
        push.stream_id = 0;
        push.learning_rate_scale = 1.0f;
        break;
      case 3:
        push.grads = {};
        break;
      case 4:
        push.name = "";
        break;
    }
    EXPECT_EQ(Encoded(push), ProtobufBytes(push));
  }
  v1::WalEntry entry;
  push = {.name = "d", .step = 5, .client_id = 1, .sequence = 2, .grads = grads};
  ASSERT_TRUE(entry.ParseFromString(Encoded(push)));
  ASSERT_TRUE(entry.has_dense_push());
  EXPECT_EQ(entry.dense_push().name(), "d");
  EXPECT_EQ(entry.dense_push().grads().size(), grads.size() * sizeof(float));
}

}  // namespace
}  // namespace brook::ps::internal
