// PullReplyWriter's hand-serialised PullResponse: parses back with protobuf
// to the same dim and rows for every varint width, and the rows it hands out
// are 8-byte aligned.
#include "ps/wire/pull_reply.h"

#include <grpcpp/support/proto_buffer_reader.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "brook/v1/ps.pb.h"

namespace brook::ps::wire {
namespace {

TEST(PullReplyWriterTest, RoundTripsThroughProtobufWithAlignedRows) {
  for (uint32_t dim : {1u, 3u, 127u, 128u, 16384u, 3000000u}) {
    for (size_t keys : {size_t{0}, size_t{1}, size_t{31}, size_t{4096}}) {
      if (uint64_t{dim} * keys > (8u << 20)) continue;
      const size_t floats = keys * dim;
      PullReplyWriter w(dim, floats);
      absl::Span<float> rows = w.rows();
      ASSERT_EQ(rows.size(), floats);
      if (floats > 0) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(rows.data()) % 8, 0u) << dim << " " << keys;
      }
      for (size_t i = 0; i < floats; ++i) rows[i] = static_cast<float>(i) * 0.5f - 3.0f;
      grpc::ByteBuffer reply = w.Finish();
      EXPECT_EQ(reply.Length() > floats * sizeof(float), true);
      grpc::ProtoBufferReader reader(&reply);
      v1::PullResponse parsed;
      ASSERT_TRUE(parsed.ParseFromZeroCopyStream(&reader)) << dim << " " << keys;
      EXPECT_EQ(parsed.dim(), dim);
      ASSERT_EQ(parsed.rows().size(), floats * sizeof(float));
      std::vector<float> back(floats);
      if (floats > 0) std::memcpy(back.data(), parsed.rows().data(), parsed.rows().size());
      for (size_t i = 0; i < floats; ++i) {
        ASSERT_EQ(back[i], static_cast<float>(i) * 0.5f - 3.0f) << i;
      }
    }
  }
}

// The same reply cut into slices of `piece` bytes, as gRPC may deliver it.
grpc::ByteBuffer Split(grpc::ByteBuffer whole, size_t piece, size_t keep_bytes = SIZE_MAX) {
  std::vector<grpc::Slice> in;
  EXPECT_TRUE(whole.Dump(&in).ok());
  std::string flat;
  for (const grpc::Slice& s : in) flat.append(reinterpret_cast<const char*>(s.begin()), s.size());
  flat.resize(std::min(flat.size(), keep_bytes));
  std::vector<grpc::Slice> out;
  for (size_t i = 0; i < flat.size(); i += piece) {
    out.emplace_back(flat.data() + i, std::min(piece, flat.size() - i));
  }
  return grpc::ByteBuffer(out.data(), out.size());
}

grpc::ByteBuffer Reply(uint32_t dim, size_t keys) {
  PullReplyWriter w(dim, keys * dim);
  for (size_t i = 0; i < keys * dim; ++i) w.rows()[i] = static_cast<float>(i) + 0.25f;
  return w.Finish();
}

TEST(ReadPullReplyTest, CopiesRowsAcrossSliceBoundaries) {
  for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, size_t{4096}, size_t{1} << 20}) {
    grpc::ByteBuffer reply = Split(Reply(5, 333), piece);
    std::vector<float> out(333 * 5, -1.0f);
    ASSERT_TRUE(ReadPullReply(&reply, 5, 333, WirePrecision::kFp32, absl::MakeSpan(out)).ok())
        << piece;
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<float>(i) + 0.25f);
  }
  // A reply from protobuf itself (fields in the usual order) reads the same.
  v1::PullResponse proto;
  proto.set_dim(2);
  const std::vector<float> rows = {1, 2, 3, 4};
  proto.set_rows(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(float));
  grpc::Slice slice(proto.SerializeAsString());
  grpc::ByteBuffer reply(&slice, 1);
  std::vector<float> out(4);
  ASSERT_TRUE(ReadPullReply(&reply, 2, 2, WirePrecision::kFp32, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, rows);
}

TEST(ReadPullReplyTest, MalformedRepliesAreErrors) {
  std::vector<float> out(10 * 4);
  grpc::ByteBuffer wrong_dim = Reply(5, 8);  // 40 floats, but dim 5 not 4
  EXPECT_FALSE(ReadPullReply(&wrong_dim, 4, 10, WirePrecision::kFp32, absl::MakeSpan(out)).ok());
  grpc::ByteBuffer wrong_count = Reply(4, 9);
  EXPECT_FALSE(ReadPullReply(&wrong_count, 4, 10, WirePrecision::kFp32, absl::MakeSpan(out)).ok());
  grpc::ByteBuffer full = Reply(4, 10);
  const size_t length = full.Length();
  for (size_t cut : {size_t{1}, size_t{3}, length / 2, length - 1}) {
    grpc::ByteBuffer truncated = Split(Reply(4, 10), 16, cut);
    EXPECT_FALSE(ReadPullReply(&truncated, 4, 10, WirePrecision::kFp32, absl::MakeSpan(out)).ok())
        << cut;
  }
  grpc::ByteBuffer ok = Reply(4, 10);
  EXPECT_TRUE(ReadPullReply(&ok, 4, 10, WirePrecision::kFp32, absl::MakeSpan(out)).ok());
}

// bf16 / fp16 replies: protobuf parses the writer's bytes to the same
// precision, scale and values; ReadPullReply decodes them across slice
// boundaries, whether the scale comes before the rows (the writer) or after
// (protobuf's own field order); a reply in another precision than asked is
// an error that says so.
TEST(PullReplyWriterTest, HalfPrecisionRepliesRoundTrip) {
  constexpr uint32_t kDim = 6;
  constexpr size_t kKeys = 77;
  std::vector<float> values(kKeys * kDim);
  for (size_t i = 0; i < values.size(); ++i) values[i] = (static_cast<float>(i) - 200) * 1e-6f;
  for (WirePrecision p : {WirePrecision::kBf16, WirePrecision::kFp16}) {
    const float scale = p == WirePrecision::kFp16 ? Fp16Scale(values) : 1.0f;
    PullReplyWriter w(kDim, values.size(), p);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w.encoded_rows()) % 8, 0u);
    EncodeValues(p, values, scale, w.encoded_rows());
    grpc::ByteBuffer reply = w.Finish(scale);
    {
      grpc::ByteBuffer copy(reply);
      grpc::ProtoBufferReader reader(&copy);
      v1::PullResponse parsed;
      ASSERT_TRUE(parsed.ParseFromZeroCopyStream(&reader));
      EXPECT_EQ(parsed.dim(), kDim);
      EXPECT_EQ(parsed.precision(), WirePrecisionNumber(p));
      EXPECT_EQ(parsed.scale(), scale);
      EXPECT_EQ(parsed.rows().size(), values.size() * 2);
    }
    std::vector<float> want = values;
    RoundTrip(p, absl::MakeSpan(want));
    for (size_t piece : {size_t{1}, size_t{5}, size_t{1} << 20}) {
      grpc::ByteBuffer cut = Split(reply, piece);
      std::vector<float> out(values.size());
      ASSERT_TRUE(ReadPullReply(&cut, kDim, kKeys, p, absl::MakeSpan(out)).ok()) << piece;
      EXPECT_EQ(out, want) << WirePrecisionName(p) << " " << piece;
      grpc::ByteBuffer as_fp32 = Split(reply, piece);
      const absl::Status wrong =
          ReadPullReply(&as_fp32, kDim, kKeys, WirePrecision::kFp32, absl::MakeSpan(out));
      EXPECT_FALSE(wrong.ok());
    }
    // Protobuf's own serialisation puts the scale after the rows.
    v1::PullResponse proto;
    proto.set_dim(kDim);
    proto.set_precision(static_cast<v1::WirePrecision>(WirePrecisionNumber(p)));
    proto.set_scale(EncodeFloatsAs(p, values, proto.mutable_rows()));
    grpc::Slice slice(proto.SerializeAsString());
    grpc::ByteBuffer from_proto(&slice, 1);
    std::vector<float> out(values.size());
    ASSERT_TRUE(ReadPullReply(&from_proto, kDim, kKeys, p, absl::MakeSpan(out)).ok());
    EXPECT_EQ(out, want) << WirePrecisionName(p);
  }
  // An fp32 reply to a bf16 request (a PS that ignores the field) is refused.
  grpc::ByteBuffer old = Reply(4, 10);
  std::vector<float> out(40);
  const absl::Status st = ReadPullReply(&old, 4, 10, WirePrecision::kBf16, absl::MakeSpan(out));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bf16"), std::string::npos) << st;
}

}  // namespace
}  // namespace brook::ps::wire
