// WAL records of the PS's pushes, encoded without a protobuf message in
// between.
//
// A push part's record is the bytes v1::WalEntry{push_part} serialises to
// (proto/brook/v1/storage.proto; replay parses it as one), written straight
// into the WAL's pending buffer: its gradients, about all of its bytes, are
// gathered once, into place. Building the message, serialising it and
// copying the result into the log cost three copies of them, a zero fill
// and two allocations per record, half the push time with the WAL on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/types/span.h"
#include "ps/table.h"

namespace brook::ps::internal {

// The record's size in bytes.
size_t WalPushPartBytes(const PushPart& part);

// Writes the record: WalPushPartBytes(part) bytes at dst.
void EncodeWalPushPart(const PushPart& part, char* dst);

// A dense push's record, v1::WalEntry{dense_push}, the same way.
struct DensePushRecord {
  std::string_view name;
  int64_t step = 0;
  uint64_t client_id = 0;
  uint64_t sequence = 0;
  uint64_t stream_id = 0;
  float learning_rate_scale = 1.0f;  // logged only when not 1, as for push parts
  absl::Span<const float> grads;
};
size_t WalDensePushBytes(const DensePushRecord& push);
void EncodeWalDensePush(const DensePushRecord& push, char* dst);

}  // namespace brook::ps::internal
