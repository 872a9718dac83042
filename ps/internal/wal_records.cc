#include "ps/internal/wal_records.h"

#include <bit>
#include <cstdint>
#include <cstring>

#include "common/varint.h"

namespace brook::ps::internal {
namespace {

// Protobuf wire format: a field's key is (number << 3) | wire type.
constexpr uint8_t kVarint = 0, kLengthDelimited = 2, kFixed32 = 5;
constexpr uint8_t Key(int number, uint8_t wire_type) {
  return static_cast<uint8_t>((number << 3) | wire_type);  // numbers here are < 16: one byte
}

// proto3 leaves a scalar at its default (0) out; so does this.
size_t VarintFieldBytes(uint64_t v) { return v == 0 ? 0 : 1 + VarintBytes(v); }
char* PutVarintField(char* dst, int number, uint64_t v) {
  if (v == 0) return dst;
  *dst++ = static_cast<char>(Key(number, kVarint));
  return PutVarint(dst, v);
}

size_t BytesFieldBytes(size_t n) { return n == 0 ? 0 : 1 + VarintBytes(n) + n; }
// Writes the key and length of a non-empty bytes field; the caller writes
// its n bytes at the returned pointer.
char* PutBytesHeader(char* dst, int number, size_t n) {
  *dst++ = static_cast<char>(Key(number, kLengthDelimited));
  return PutVarint(dst, n);
}

// The learning-rate scale is logged only when it is not 1 (an unscaled
// push logs the bytes it always did), and proto3 leaves out 0.
bool LogsScale(float scale) { return scale != 1.0f && std::bit_cast<uint32_t>(scale) != 0; }

size_t GradBytes(const PushPart& part) {
  return part.keys.size() * static_cast<size_t>(part.dim) * sizeof(float);
}

// WalPushPart's fields, in field-number order (as protobuf writes them).
size_t PushPartBodyBytes(const PushPart& part) {
  return BytesFieldBytes(part.table.size()) + VarintFieldBytes(part.push_id) +
         VarintFieldBytes(part.part) + VarintFieldBytes(part.parts) +
         VarintFieldBytes(static_cast<uint64_t>(part.step)) + VarintFieldBytes(part.client_id) +
         VarintFieldBytes(part.sequence) + BytesFieldBytes(part.keys.size() * sizeof(uint64_t)) +
         BytesFieldBytes(GradBytes(part)) + (LogsScale(part.learning_rate_scale) ? 5 : 0) +
         VarintFieldBytes(part.stream_id);
}

// A non-empty bytes field with its n bytes.
char* PutBytesField(char* dst, int number, const void* data, size_t n) {
  if (n == 0) return dst;
  dst = PutBytesHeader(dst, number, n);
  std::memcpy(dst, data, n);
  return dst + n;
}

char* PutScaleField(char* dst, int number, float scale) {
  if (!LogsScale(scale)) return dst;
  *dst++ = static_cast<char>(Key(number, kFixed32));
  std::memcpy(dst, &scale, sizeof(float));
  return dst + sizeof(float);
}

// WalDensePush's fields, in field-number order.
size_t DensePushBodyBytes(const DensePushRecord& push) {
  return BytesFieldBytes(push.name.size()) + VarintFieldBytes(static_cast<uint64_t>(push.step)) +
         VarintFieldBytes(push.client_id) + VarintFieldBytes(push.sequence) +
         BytesFieldBytes(push.grads.size() * sizeof(float)) +
         (LogsScale(push.learning_rate_scale) ? 5 : 0) + VarintFieldBytes(push.stream_id);
}

}  // namespace

size_t WalDensePushBytes(const DensePushRecord& push) {
  const size_t body = DensePushBodyBytes(push);
  return 1 + VarintBytes(body) + body;  // WalEntry.dense_push = 2
}

void EncodeWalDensePush(const DensePushRecord& push, char* dst) {
  dst = PutBytesHeader(dst, 2, DensePushBodyBytes(push));  // WalEntry.dense_push
  dst = PutBytesField(dst, 1, push.name.data(), push.name.size());
  dst = PutVarintField(dst, 2, static_cast<uint64_t>(push.step));
  dst = PutVarintField(dst, 3, push.client_id);
  dst = PutVarintField(dst, 4, push.sequence);
  dst = PutBytesField(dst, 5, push.grads.data(), push.grads.size() * sizeof(float));
  dst = PutScaleField(dst, 6, push.learning_rate_scale);
  PutVarintField(dst, 7, push.stream_id);
}

size_t WalPushPartBytes(const PushPart& part) {
  const size_t body = PushPartBodyBytes(part);
  return 1 + VarintBytes(body) + body;  // WalEntry.push_part = 1
}

void EncodeWalPushPart(const PushPart& part, char* dst) {
  dst = PutBytesHeader(dst, 1, PushPartBodyBytes(part));  // WalEntry.push_part
  dst = PutBytesField(dst, 1, part.table.data(), part.table.size());
  dst = PutVarintField(dst, 2, part.push_id);
  dst = PutVarintField(dst, 3, part.part);
  dst = PutVarintField(dst, 4, part.parts);
  dst = PutVarintField(dst, 5, static_cast<uint64_t>(part.step));  // int64: two's complement
  dst = PutVarintField(dst, 6, part.client_id);
  dst = PutVarintField(dst, 7, part.sequence);
  // Packed little-endian uint64 (and float32 below), as the host stores them.
  static_assert(std::endian::native == std::endian::little);
  dst = PutBytesField(dst, 8, part.keys.data(), part.keys.size() * sizeof(uint64_t));
  if (const size_t n = GradBytes(part); n > 0) {
    // The part's gradients, in the part's key order: row j is the request's
    // row original[j].
    dst = PutBytesHeader(dst, 9, n);
    const size_t row = static_cast<size_t>(part.dim) * sizeof(float);
    const float* grads = part.grads.data();
    for (size_t j = 0; j < part.original.size(); ++j) {
      std::memcpy(dst, grads + size_t{part.original[j]} * part.dim, row);
      dst += row;
    }
  }
  dst = PutScaleField(dst, 10, part.learning_rate_scale);
  PutVarintField(dst, 11, part.stream_id);
}

}  // namespace brook::ps::internal
