// HyperLogLog distinct-count sketch over 64-bit hashes of values.
//
// Precision p gives 2^p one-byte registers and a standard error of about
// 1.04 / sqrt(2^p) (0.81% at the default p = 14, 16 KiB). Until a sketch has
// seen kExactLimit distinct hashes it keeps them in a set and counts exactly,
// so the many low-cardinality features of a dataset cost little memory and
// report exact counts. The estimator is Ertl's improved raw estimator
// ("New cardinality estimation algorithms for HyperLogLog sketches", 2017; the
// one Redis uses), which needs no empirical bias tables and is accurate from
// a handful of values to 2^64.
//
// Callers hash values themselves (brook::Hash64 for strings, Mix64 for ints),
// so the same value always lands in the same register across processes and
// sketches can be merged. Thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace brook::datatools {

class HyperLogLog {
 public:
  static constexpr int kDefaultPrecision = 14;
  static constexpr size_t kExactLimit = 1024;

  // REQUIRES: 4 <= precision <= 18.
  explicit HyperLogLog(int precision = kDefaultPrecision);

  void AddHash(uint64_t hash);
  // REQUIRES: other.precision() == precision().
  void Merge(const HyperLogLog& other);
  // Estimated number of distinct hashes added.
  double Estimate() const;
  int precision() const { return precision_; }

 private:
  void ToDense();
  void AddToRegisters(uint64_t hash);

  int precision_;
  absl::flat_hash_set<uint64_t> exact_;  // used until registers_ is allocated
  std::vector<uint8_t> registers_;       // empty while counting exactly
};

}  // namespace brook::datatools
