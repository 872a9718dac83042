// PullReplyWriter: a brook.v1.PullResponse serialised by hand into one gRPC
// slice, so the PS gathers rows straight into the bytes gRPC sends.
//
// Layout (valid protobuf; field order is free):
//   0x10 varint(dim) 0x0A varint(rows bytes) rows...
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

namespace brook::ps::wire {

class PullReplyWriter {
 public:
  PullReplyWriter(uint32_t dim, size_t floats);
  // Where the rows go: floats x float, 8-byte aligned, uninitialised.
  absl::Span<float> rows() { return rows_; }
  // The reply; the writer is spent.
  grpc::ByteBuffer Finish();

 private:
  grpc::Slice slice_;
  size_t begin_ = 0, end_ = 0;
  absl::Span<float> rows_;
};

namespace pull_reply_internal {

constexpr uint8_t kDimTag = (2 << 3) | 0;   // field 2, varint
constexpr uint8_t kRowsTag = (1 << 3) | 2;  // field 1, length-delimited
constexpr size_t kMaxVarint = 10;
constexpr size_t kAlign = 8;

inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline uint8_t* PutVarint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

}  // namespace pull_reply_internal

inline PullReplyWriter::PullReplyWriter(uint32_t dim, size_t floats) {
  using namespace pull_reply_internal;  // NOLINT: this file's own helpers
  const size_t row_bytes = floats * sizeof(float);
  const size_t header = 2 + VarintSize(dim) + VarintSize(row_bytes);
  // Room for the header, the rows, and up to kAlign - 1 bytes of lead-in.
  slice_ = grpc::Slice(kAlign - 1 + 2 + 2 * kMaxVarint + row_bytes);
  auto* base = const_cast<uint8_t*>(slice_.begin());
  const auto addr = reinterpret_cast<uintptr_t>(base);
  begin_ = (kAlign - (addr + header) % kAlign) % kAlign;  // rows at an aligned address
  uint8_t* p = base + begin_;
  *p++ = kDimTag;
  p = PutVarint(p, dim);
  *p++ = kRowsTag;
  p = PutVarint(p, row_bytes);
  end_ = begin_ + header + row_bytes;
  rows_ = absl::Span<float>(reinterpret_cast<float*>(p), floats);
}

inline grpc::ByteBuffer PullReplyWriter::Finish() {
  grpc::Slice message = slice_.sub(begin_, end_);  // shares the allocation
  return grpc::ByteBuffer(&message, 1);
}

// Reads a PullResponse from a reply's slices, copying row r (dim floats)
// straight to row_dst(r): the one copy the client makes, into the caller's
// output in its order. INVALID_ARGUMENT if the reply is malformed or its dim /
// row count is not what was asked; rows may then be partly written.
inline absl::Status ReadPullReply(grpc::ByteBuffer* reply, uint32_t dim, size_t keys,
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
  const uint64_t want = uint64_t{keys} * dim * sizeof(float);
  uint64_t got_dim = 0;
  bool got_rows = false;
  for (;;) {
    uint64_t tag;
    if (!varint(&tag)) break;  // end of message
    const uint64_t field = tag >> 3, type = tag & 7;
    uint64_t v;
    if (field == 2 && type == 0) {
      if (!varint(&got_dim)) return absl::InvalidArgumentError("pull reply: truncated dim");
    } else if (field == 1 && type == 2) {
      if (!varint(&v)) return absl::InvalidArgumentError("pull reply: truncated rows length");
      if (v != want) {
        return absl::InvalidArgumentError(
            absl::StrCat("pull reply: ", v, " row bytes for ", keys, " keys x dim ", dim));
      }
      for (size_t r = 0; r < keys; ++r) {
        if (!bytes(reinterpret_cast<char*>(row_dst(r)), size_t{dim} * sizeof(float))) {
          return absl::InvalidArgumentError("pull reply: truncated rows");
        }
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
  return absl::OkStatus();
}

// As above, into `out` (keys x dim floats) in reply order.
inline absl::Status ReadPullReply(grpc::ByteBuffer* reply, uint32_t dim, size_t keys,
                                  absl::Span<float> out) {
  if (out.size() != uint64_t{keys} * dim) {
    return absl::InternalError("pull reply: output span does not match keys x dim");
  }
  return ReadPullReply(reply, dim, keys, [&](size_t r) { return out.data() + r * size_t{dim}; });
}

}  // namespace brook::ps::wire
