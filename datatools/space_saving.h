// Top-k heavy hitters of a stream of strings with bounded memory: the
// Space-Saving algorithm (Metwally, Agrawal, El Abbadi, 2005).
//
// It keeps `capacity` counters. A new value takes over the smallest counter
// and inherits its count as its error, so every reported count is an upper
// bound and count - error a lower bound; any value occurring more than
// N / capacity times is guaranteed to be kept. While a stream has at most
// `capacity` distinct values every count is exact (error 0). Counters sit in
// a min-heap indexed by value, so an update is O(log capacity).
//
// Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace brook::datatools {

class SpaceSaving {
 public:
  struct Entry {
    std::string value;
    uint64_t count = 0;  // upper bound on the true count
    uint64_t error = 0;  // count - error is a lower bound
  };

  // REQUIRES: capacity >= 1.
  explicit SpaceSaving(size_t capacity);

  void Add(std::string_view value, uint64_t count = 1);
  // The k largest counters, by count descending, then value ascending.
  std::vector<Entry> Top(size_t k) const;
  uint64_t total() const { return total_; }
  size_t capacity() const { return capacity_; }

 private:
  void SiftDown(size_t i);
  void SiftUp(size_t i);
  void Swap(size_t a, size_t b);

  size_t capacity_;
  uint64_t total_ = 0;
  std::vector<Entry> heap_;                         // min-heap on count
  absl::flat_hash_map<std::string, size_t> index_;  // value -> position in heap_
};

}  // namespace brook::datatools
