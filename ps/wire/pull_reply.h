// PullReplyWriter: a brook.v1.PullResponse serialised by hand into one gRPC
// slice, so the PS gathers rows straight into the bytes gRPC sends.
//
// Layout (valid protobuf; field order is free):
//   0x10 varint(dim) 0x0A varint(rows bytes) rows...                (fp32)
//   0x10 varint(dim) 0x18 varint(precision) 0x25 fixed32(scale)
//        0x0A varint(rows bytes) rows...                            (bf16, fp16)
// The scale's slot is written at Finish, once the rows are known.
// The slice is allocated a few bytes long and the message is a sub-slice
// starting where the rows land 8-byte aligned, so the float writes are
// aligned. gRPC's default path instead zero-fills a std::string for the rows,
// then copies it while serialising (BENCHMARKS.md, issue 3).
//
// Header-only, like wire.h: the server writes and the client reads replies
// without linking each other. Thread-compatible (one writer per reply).
#pragma once

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "common/varint.h"
#include "ps/wire/precision.h"

namespace brook::ps::wire {

class PullReplyWriter {
 public:
  PullReplyWriter(uint32_t dim, size_t values, WirePrecision precision = WirePrecision::kFp32);
  // Where fp32 rows go: values x float, 8-byte aligned, uninitialised.
  // REQUIRES: precision fp32.
  absl::Span<float> rows() { return rows_; }
  // Where bf16 / fp16 rows go: values x 2 bytes (EncodeValues), 8-byte aligned.
  char* encoded_rows() { return encoded_; }
  // The reply, with fp16's scale (1 otherwise); the writer is spent.
  grpc::ByteBuffer Finish(float scale = 1.0f);

 private:
  grpc::Slice slice_;
  size_t begin_ = 0, end_ = 0;
  absl::Span<float> rows_;
  char* encoded_ = nullptr;
  uint8_t* scale_slot_ = nullptr;  // the scale's 4 bytes (bf16 / fp16)
};

namespace pull_reply_internal {

constexpr uint8_t kDimTag = (2 << 3) | 0;        // field 2, varint
constexpr uint8_t kRowsTag = (1 << 3) | 2;       // field 1, length-delimited
constexpr uint8_t kPrecisionTag = (3 << 3) | 0;  // field 3, varint
constexpr uint8_t kScaleTag = (4 << 3) | 5;      // field 4, fixed32
constexpr size_t kMaxVarint = kMaxVarintBytes;
constexpr size_t kAlign = 8;

}  // namespace pull_reply_internal

inline PullReplyWriter::PullReplyWriter(uint32_t dim, size_t values, WirePrecision precision) {
  using namespace pull_reply_internal;  // NOLINT: this file's own helpers
  const bool fp32 = precision == WirePrecision::kFp32;
  const size_t row_bytes = values * WireValueBytes(precision);
  const uint64_t precision_number = static_cast<uint64_t>(WirePrecisionNumber(precision));
  const size_t extra = fp32 ? 0 : 1 + VarintBytes(precision_number) + 5;
  const size_t header = 2 + VarintBytes(dim) + extra + VarintBytes(row_bytes);
  // Room for the header, the rows, and up to kAlign - 1 bytes of lead-in.
  slice_ = grpc::Slice(kAlign - 1 + 2 + 2 * kMaxVarint + extra + row_bytes);
  auto* base = const_cast<uint8_t*>(slice_.begin());
  const auto addr = reinterpret_cast<uintptr_t>(base);
  begin_ = (kAlign - (addr + header) % kAlign) % kAlign;  // rows at an aligned address
  uint8_t* p = base + begin_;
  *p++ = kDimTag;
  p = PutVarint(p, dim);
  if (!fp32) {
    *p++ = kPrecisionTag;
    p = PutVarint(p, precision_number);
    *p++ = kScaleTag;
    scale_slot_ = p;
    p += 4;
  }
  *p++ = kRowsTag;
  p = PutVarint(p, row_bytes);
  end_ = begin_ + header + row_bytes;
  if (fp32) {
    rows_ = absl::Span<float>(reinterpret_cast<float*>(p), values);
  } else {
    encoded_ = reinterpret_cast<char*>(p);
  }
}

inline grpc::ByteBuffer PullReplyWriter::Finish(float scale) {
  if (scale_slot_ != nullptr) std::memcpy(scale_slot_, &scale, sizeof(scale));  // little-endian
  grpc::Slice message = slice_.sub(begin_, end_);  // shares the allocation
  return grpc::ByteBuffer(&message, 1);
}

// Reads a PullResponse from a reply's slices, copying row r (dim floats)
// straight to row_dst(r): the one copy the client makes, into the caller's
// output in its order (bf16 / fp16 rows are decoded on the way). INVALID_ARGUMENT if
// the reply is malformed or its dim / row count / precision is not what was
// asked; rows may then be partly written.
inline absl::Status ReadPullReply(grpc::ByteBuffer* reply, uint32_t dim, size_t keys,
                                  WirePrecision precision,
                                  absl::FunctionRef<float*(size_t row)> row_dst) {
  std::vector<grpc::Slice> slices;
  if (!reply->Dump(&slices).ok()) return absl::InvalidArgumentError("pull reply: unreadable");
  size_t si = 0, off = 0;  // read position: slice, offset within it
  auto next_byte = [&](uint8_t* b) {
    while (si < slices.size() && off == slices[si].size()) {
      ++si;
      off = 0;
    }
    if (si == slices.size()) return false;
    *b = slices[si].begin()[off++];
    return true;
  };
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!next_byte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  };
  // Copies n bytes to dst (or skips them when dst is null).
  auto bytes = [&](char* dst, size_t n) {
    while (n > 0) {
      if (si == slices.size()) return false;
      const size_t take = std::min(n, slices[si].size() - off);
      if (dst != nullptr) {
        std::memcpy(dst, slices[si].begin() + off, take);
        dst += take;
      }
      off += take;
      n -= take;
      if (off == slices[si].size()) {
        ++si;
        off = 0;
      }
    }
    return true;
  };
  const size_t value_bytes = WireValueBytes(precision);
  const uint64_t want = uint64_t{keys} * dim * value_bytes;
  const bool fp32 = precision == WirePrecision::kFp32;
  std::vector<char> encoded(fp32 ? 0 : size_t{dim} * value_bytes);  // one row
  uint64_t got_dim = 0, got_precision = 0;
  float scale = 0;
  bool got_rows = false, scale_before_rows = false;
  for (;;) {
    uint64_t tag;
    if (!varint(&tag)) break;  // end of message
    const uint64_t field = tag >> 3, type = tag & 7;
    uint64_t v;
    if (field == 2 && type == 0) {
      if (!varint(&got_dim)) return absl::InvalidArgumentError("pull reply: truncated dim");
    } else if (field == 3 && type == 0) {
      if (!varint(&got_precision)) {
        return absl::InvalidArgumentError("pull reply: truncated precision");
      }
    } else if (field == 4 && type == 5) {
      if (!bytes(reinterpret_cast<char*>(&scale), sizeof(scale))) {
        return absl::InvalidArgumentError("pull reply: truncated scale");
      }
      RETURN_IF_ERROR(CheckScale(&scale, "pull reply"));
      scale_before_rows = !got_rows;
    } else if (field == 1 && type == 2) {
      if (!varint(&v)) return absl::InvalidArgumentError("pull reply: truncated rows length");
      if (v != want) {
        return absl::InvalidArgumentError(absl::StrCat("pull reply: ", v, " row bytes for ", keys,
                                                       " keys x dim ", dim, " in ",
                                                       std::string(WirePrecisionName(precision))));
      }
      // A scale seen before the rows (as PullReplyWriter puts it) applies as
      // they are decoded; one after them, in a second pass below.
      const float decode_scale = scale_before_rows ? scale : 1.0f;
      for (size_t r = 0; r < keys; ++r) {
        float* dst = row_dst(r);
        if (fp32) {
          if (!bytes(reinterpret_cast<char*>(dst), size_t{dim} * sizeof(float))) {
            return absl::InvalidArgumentError("pull reply: truncated rows");
          }
          continue;
        }
        while (si < slices.size() && off == slices[si].size()) {
          ++si;
          off = 0;
        }
        if (si < slices.size() && slices[si].size() - off >= encoded.size()) {
          // The row lies in one slice (the usual case): decode it in place.
          DecodeValues(precision, reinterpret_cast<const char*>(slices[si].begin()) + off, dim,
                       decode_scale, dst);
          off += encoded.size();
          continue;
        }
        if (!bytes(encoded.data(), encoded.size())) {
          return absl::InvalidArgumentError("pull reply: truncated rows");
        }
        DecodeValues(precision, encoded.data(), dim, decode_scale, dst);
      }
      got_rows = true;
    } else if (type == 0) {
      if (!varint(&v)) return absl::InvalidArgumentError("pull reply: truncated field");
    } else if (type == 2) {
      if (!varint(&v) || !bytes(nullptr, v)) {
        return absl::InvalidArgumentError("pull reply: truncated field");
      }
    } else if (type == 1 || type == 5) {
      if (!bytes(nullptr, type == 1 ? 8 : 4)) {
        return absl::InvalidArgumentError("pull reply: truncated field");
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("pull reply: bad wire type ", type));
    }
  }
  if (want > 0 && !got_rows) return absl::InvalidArgumentError("pull reply: no rows");
  if (want > 0 && got_dim != dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("pull reply: dim ", got_dim, ", the request said ", dim));
  }
  if (got_precision != static_cast<uint64_t>(WirePrecisionNumber(precision))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pull reply: precision ", got_precision, ", the request said ",
        std::string(WirePrecisionName(precision)), " (a PS too old for wire precision?)"));
  }
  if (got_rows && !scale_before_rows && scale != 0 && scale != 1.0f) {
    const float inv = 1.0f / scale;
    for (size_t r = 0; r < keys; ++r) {
      float* row = row_dst(r);
      for (uint32_t j = 0; j < dim; ++j) row[j] *= inv;
    }
  }
  return absl::OkStatus();
}

// As above, into `out` (keys x dim floats) in reply order.
inline absl::Status ReadPullReply(grpc::ByteBuffer* reply, uint32_t dim, size_t keys,
                                  WirePrecision precision, absl::Span<float> out) {
  if (out.size() != uint64_t{keys} * dim) {
    return absl::InternalError("pull reply: output span does not match keys x dim");
  }
  return ReadPullReply(reply, dim, keys, precision,
                       [&](size_t r) { return out.data() + r * size_t{dim}; });
}

}  // namespace brook::ps::wire
