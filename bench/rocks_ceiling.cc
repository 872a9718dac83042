#include "bench/rocks_ceiling.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <system_error>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/status_macros.h"

namespace brook::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kFamily[] = "ceiling";
constexpr int kMaxPoolBatches = 64;
constexpr int64_t kPopulateBatch = 4096;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Pre-drawn batches of distinct keys, uniform over [0, rows), so drawing keys
// is not part of the measured loops.
class KeyPool {
 public:
  KeyPool(int64_t rows, int batch, uint64_t seed) : batch_(batch) {
    num_batches_ =
        static_cast<int>(std::clamp<int64_t>(rows / batch, int64_t{1}, int64_t{kMaxPoolBatches}));
    keys_.reserve(static_cast<size_t>(num_batches_) * batch);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<uint64_t> dist(0, static_cast<uint64_t>(rows - 1));
    absl::flat_hash_set<uint64_t> seen;
    for (int b = 0; b < num_batches_; ++b) {
      seen.clear();
      while (static_cast<int>(seen.size()) < batch) {
        uint64_t k = dist(rng);
        if (seen.insert(k).second) keys_.push_back(k);
      }
    }
  }
  absl::Span<const uint64_t> Batch(int64_t i) const {
    return absl::MakeConstSpan(keys_).subspan(static_cast<size_t>(i % num_batches_) * batch_,
                                              batch_);
  }

 private:
  int batch_;
  int num_batches_;
  std::vector<uint64_t> keys_;
};

// Calls fn(i) for i = 0 (warm-up, not timed), 1, 2, ... until `seconds` have
// passed; returns timed calls per second.
template <typename Fn>
absl::StatusOr<double> CallsPerSecond(double seconds, Fn fn) {
  RETURN_IF_ERROR(fn(0));
  const auto t0 = Clock::now();
  int64_t calls = 0;
  double elapsed = 0;
  do {
    RETURN_IF_ERROR(fn(calls + 1));
    ++calls;
    elapsed = SecondsSince(t0);
  } while (elapsed < seconds);
  return static_cast<double>(calls) / elapsed;
}

}  // namespace

absl::StatusOr<RocksCeiling> MeasureRocksCeiling(const std::string& dir,
                                                 const storage::RocksDbOptions& options,
                                                 int64_t rows, size_t row_bytes, int batch,
                                                 double seconds, uint64_t seed) {
  if (rows <= 0 || row_bytes < 16 || batch <= 0 || batch > rows || seconds <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rocks ceiling: need rows > 0, row_bytes >= 16, 0 < batch <= rows, seconds > 0; got rows=",
        rows, " row_bytes=", row_bytes, " batch=", batch, " seconds=", seconds));
  }
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::path(dir) / "CURRENT", ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("rocks ceiling: ", dir, " already holds a database"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<storage::RocksDb> db, storage::RocksDb::Open(dir, options));
  RETURN_IF_ERROR(db->CreateColumnFamily(kFamily));

  // Rows as the PS stores them: a 16-byte header (here the key and a
  // version) and random floats, which do not compress, like trained weights.
  const size_t max_batch = static_cast<size_t>(std::max<int64_t>(batch, kPopulateBatch));
  std::vector<char> values(max_batch * row_bytes);
  {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::normal_distribution<float> weight(0.0f, 0.05f);
    for (size_t i = 0; i + sizeof(float) <= values.size(); i += sizeof(float)) {
      float w = weight(rng);
      std::memcpy(&values[i], &w, sizeof(w));
    }
  }
  auto stamp = [&](absl::Span<const uint64_t> keys, uint64_t version) {
    for (size_t i = 0; i < keys.size(); ++i) {
      std::memcpy(&values[i * row_bytes], &keys[i], 8);
      std::memcpy(&values[i * row_bytes + 8], &version, 8);
    }
  };

  RocksCeiling result;
  const auto t0 = Clock::now();
  std::vector<uint64_t> keys;
  for (int64_t start = 0; start < rows; start += kPopulateBatch) {
    keys.clear();
    for (int64_t k = start; k < std::min(rows, start + kPopulateBatch); ++k) {
      keys.push_back(static_cast<uint64_t>(k));
    }
    stamp(keys, 0);
    RETURN_IF_ERROR(db->Write(kFamily, keys, values.data(), row_bytes, {}));
  }
  RETURN_IF_ERROR(db->Flush());
  // Settle the LSM: otherwise the L0 -> bottom compaction the fill triggers
  // runs during the first measurement (seconds of it on 2 cores), and a
  // ceiling is the best case: every row in one level.
  RETURN_IF_ERROR(db->CompactAll());
  result.populate_seconds = SecondsSince(t0);

  const KeyPool pool(rows, batch, seed + 1);
  std::vector<char> out(static_cast<size_t>(batch) * row_bytes);
  std::unique_ptr<bool[]> found(new bool[batch]);
  ASSIGN_OR_RETURN(double gets, CallsPerSecond(seconds, [&](int64_t i) -> absl::Status {
                     absl::Span<const uint64_t> k = pool.Batch(i);
                     RETURN_IF_ERROR(db->MultiGet(kFamily, k, row_bytes, out.data(), found.get()));
                     // A ceiling that measured misses would be no ceiling.
                     for (size_t j = 0; j < k.size(); ++j) {
                       if (!found[j]) {
                         return absl::InternalError(
                             absl::StrCat("rocks ceiling: populated key ", k[j], " not found"));
                       }
                     }
                     return absl::OkStatus();
                   }));
  result.multiget_rows_per_s = gets * batch;

  ASSIGN_OR_RETURN(double puts, CallsPerSecond(seconds, [&](int64_t i) -> absl::Status {
                     // Offset into the pool so writes do not replay the read batches.
                     absl::Span<const uint64_t> k = pool.Batch(i + kMaxPoolBatches / 2);
                     stamp(k, static_cast<uint64_t>(i) + 1);
                     return db->Write(kFamily, k, values.data(), row_bytes, {});
                   }));
  result.writebatch_rows_per_s = puts * batch;
  return result;
}

}  // namespace brook::bench
