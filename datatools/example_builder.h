// ExampleBuilder writes a tf.train.Example in protobuf wire format directly,
// without building message objects: the synthetic generator encodes hundreds
// of thousands of examples per second per core, and the generated protobuf
// classes allocate a map node, a Feature and a list per feature per example.
//
// The bytes are what protobuf's own serializer would produce for the same
// features in the same order (floats and int64s packed, as TensorFlow writes
// them), so any tf.train.Example parser reads them. Features are written in
// the order they are added; a name added twice appears twice and a parser
// keeps the last one (protobuf map semantics).
//
//   ExampleBuilder b;
//   b.Clear();
//   b.AddFloats("label", one_float);
//   b.AddInt64s("C1", ids);
//   std::string_view bytes = b.Serialize();  // valid until the next call
//
// Thread-compatible: one builder per thread. Buffers are reused, so once warm
// an example costs no allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace brook::datatools {

class ExampleBuilder {
 public:
  ExampleBuilder();
  ExampleBuilder(const ExampleBuilder&) = delete;
  ExampleBuilder& operator=(const ExampleBuilder&) = delete;

  // Starts a new example; keeps the buffer's capacity.
  void Clear();

  // Adds feature `name` as a float_list / int64_list / bytes_list. An empty
  // span writes an empty list of that kind (the feature is present, with
  // zero values), as TensorFlow does.
  void AddFloats(std::string_view name, std::span<const float> values);
  void AddInt64s(std::string_view name, std::span<const int64_t> values);
  void AddBytes(std::string_view name, std::span<const std::string_view> values);

  // The serialized Example holding every feature added since Clear(). The
  // view stays valid until the next non-const call. Calling it twice without
  // adding anything returns the same bytes.
  std::string_view Serialize();

  // Bytes of feature entries added so far (the Example adds a few more).
  size_t features_bytes() const { return pos_ - kHeadroom; }

 private:
  // Room before the feature entries for the Example's own tag and length,
  // written right-aligned by Serialize() so the entries are never copied.
  // 1 tag byte + at most 10 varint bytes.
  static constexpr size_t kHeadroom = 16;

  // Makes room for `n` more bytes at pos_ and returns where they start.
  char* Reserve(size_t n) {
    if (pos_ + n > buf_.size()) Grow(n);
    return buf_.data() + pos_;
  }
  void Grow(size_t n);
  // Appends the framing of one Features.feature map entry (entry tag and
  // length, key, Feature tag and length, the list's oneof tag and length)
  // for a list message of `list_len` bytes, reserves those bytes too, and
  // returns where the caller must write exactly `list_len` bytes.
  char* BeginFeature(std::string_view name, uint8_t kind_tag, size_t list_len);

  std::vector<char> buf_;
  size_t pos_ = kHeadroom;
};

}  // namespace brook::datatools
