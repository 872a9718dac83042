#include "datatools/example_builder.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace brook::datatools {
namespace {

// Wire tags (field_number << 3 | wire_type 2 = length-delimited). Every field
// on the path Example.features -> Features.feature (map entry: key=1,
// value=2) -> Feature.{bytes_list=1, float_list=2, int64_list=3} -> *List.value
// is length-delimited (packed for floats and int64s).
constexpr uint8_t kTagField1 = 0x0A;
constexpr uint8_t kTagField2 = 0x12;
constexpr uint8_t kTagBytesList = 0x0A;
constexpr uint8_t kTagFloatList = 0x12;
constexpr uint8_t kTagInt64List = 0x1A;

inline size_t VarintSize(uint64_t v) {
  // 7 payload bits per byte; bit_width(0) is 0 but 0 still takes one byte.
  return (static_cast<size_t>(std::bit_width(v | 1)) + 6) / 7;
}

inline char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

// A packed repeated field: tag + length + payload, or nothing when empty
// (proto3 omits an empty packed field, and so does protobuf's serializer).
inline size_t PackedFieldSize(size_t payload) {
  return payload == 0 ? 0 : 1 + VarintSize(payload) + payload;
}

}  // namespace

ExampleBuilder::ExampleBuilder() : buf_(4096) {}

void ExampleBuilder::Clear() { pos_ = kHeadroom; }

void ExampleBuilder::Grow(size_t n) { buf_.resize(std::max(buf_.size() * 2, pos_ + n)); }

char* ExampleBuilder::BeginFeature(std::string_view name, uint8_t kind_tag, size_t list_len) {
  // Common case (short name, few values): every length is below 128 and so a
  // one-byte varint; write the framing without the varint loops.
  const size_t small_entry_len = 6 + name.size() + list_len;
  if (small_entry_len < 128) {
    char* p = Reserve(small_entry_len + 2);
    p[0] = static_cast<char>(kTagField1);
    p[1] = static_cast<char>(small_entry_len);
    p[2] = static_cast<char>(kTagField1);
    p[3] = static_cast<char>(name.size());
    p += 4;
    for (char c : name) *p++ = c;  // names are a few bytes: no memcpy call
    p[0] = static_cast<char>(kTagField2);
    p[1] = static_cast<char>(2 + list_len);
    p[2] = static_cast<char>(kind_tag);
    p[3] = static_cast<char>(list_len);
    pos_ += small_entry_len + 2;
    return p + 4;
  }
  const size_t feature_len = 1 + VarintSize(list_len) + list_len;
  const size_t entry_len =
      1 + VarintSize(name.size()) + name.size() + 1 + VarintSize(feature_len) + feature_len;
  const size_t total = 1 + VarintSize(entry_len) + entry_len;
  char* p = Reserve(total);
  *p++ = static_cast<char>(kTagField1);  // Features.feature (map entry)
  p = PutVarint(p, entry_len);
  *p++ = static_cast<char>(kTagField1);  // entry key
  p = PutVarint(p, name.size());
  if (!name.empty()) std::memcpy(p, name.data(), name.size());
  p += name.size();
  *p++ = static_cast<char>(kTagField2);  // entry value: Feature
  p = PutVarint(p, feature_len);
  *p++ = static_cast<char>(kind_tag);
  p = PutVarint(p, list_len);
  pos_ += total;
  return p;
}

void ExampleBuilder::AddFloats(std::string_view name, std::span<const float> values) {
  const size_t payload = values.size() * sizeof(float);
  char* p = BeginFeature(name, kTagFloatList, PackedFieldSize(payload));
  if (payload == 0) return;
  *p++ = static_cast<char>(kTagField1);
  p = PutVarint(p, payload);
  if constexpr (std::endian::native == std::endian::little) {
    if (values.size() == 1) {
      std::memcpy(p, values.data(), sizeof(float));  // fixed size: no memcpy call
    } else {
      std::memcpy(p, values.data(), payload);
    }
  } else {
    for (float f : values) {
      uint32_t u = std::bit_cast<uint32_t>(f);
      for (int i = 0; i < 4; ++i) *p++ = static_cast<char>(u >> (8 * i));
    }
  }
}

void ExampleBuilder::AddInt64s(std::string_view name, std::span<const int64_t> values) {
  size_t payload = 0;
  // int64 is encoded as the two's-complement uint64, so negatives take 10 bytes.
  for (int64_t v : values) payload += VarintSize(static_cast<uint64_t>(v));
  char* p = BeginFeature(name, kTagInt64List, PackedFieldSize(payload));
  if (payload == 0) return;
  *p++ = static_cast<char>(kTagField1);
  p = PutVarint(p, payload);
  for (int64_t v : values) p = PutVarint(p, static_cast<uint64_t>(v));
}

void ExampleBuilder::AddBytes(std::string_view name, std::span<const std::string_view> values) {
  size_t list_len = 0;
  // Not packed: each value is its own tag + length + bytes.
  for (std::string_view v : values) list_len += 1 + VarintSize(v.size()) + v.size();
  char* p = BeginFeature(name, kTagBytesList, list_len);
  for (std::string_view v : values) {
    *p++ = static_cast<char>(kTagField1);
    p = PutVarint(p, v.size());
    if (!v.empty()) std::memcpy(p, v.data(), v.size());
    p += v.size();
  }
}

std::string_view ExampleBuilder::Serialize() {
  // Example is one field: features (1) holding the map entries written so far.
  // The header goes right before the entries, inside the headroom.
  const size_t features_len = pos_ - kHeadroom;
  char header[kHeadroom];
  char* end = PutVarint(header + 1, features_len);
  header[0] = static_cast<char>(kTagField1);
  const size_t header_len = static_cast<size_t>(end - header);
  char* start = buf_.data() + kHeadroom - header_len;
  std::memcpy(start, header, header_len);
  return std::string_view(start, pos_ - (kHeadroom - header_len));
}

}  // namespace brook::datatools
