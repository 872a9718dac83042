// The bare-RocksDB ceiling for the PS's cold-row tier: how many rows/s one
// thread gets out of storage::RocksDb (the wrapper the PS uses, with the same
// options) for batched random lookups and batched overwrites, with nothing of
// the PS around it. `brook bench ps` prints the PS's RocksDB tier beside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "storage/rocks_db.h"

namespace brook::bench {

struct RocksCeiling {
  double multiget_rows_per_s = 0;
  double writebatch_rows_per_s = 0;
  double populate_seconds = 0;  // sequential fill of all rows + Flush() + CompactAll()
};

// Fills a fresh RocksDb (options as given) at `dir` with rows [0, rows) of
// row_bytes each (one column family), flushes and compacts (so no background
// compaction of the fill overlaps the measurements), then for `seconds` each
// measures MultiGet of random batches of `batch` distinct keys and WriteBatch
// puts (overwrites) of random batches, single-threaded. This is the ceiling
// the PS's RocksDB tier is compared against in `brook bench ps` (c).
// FAILED_PRECONDITION if `dir` already holds a database (a ceiling measured
// over leftover data would not be comparable); the DB is left at `dir`.
absl::StatusOr<RocksCeiling> MeasureRocksCeiling(const std::string& dir,
                                                 const storage::RocksDbOptions& options,
                                                 int64_t rows, size_t row_bytes, int batch,
                                                 double seconds, uint64_t seed);

}  // namespace brook::bench
