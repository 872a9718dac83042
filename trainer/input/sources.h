// The read stage's building blocks: which work units a pipeline reads, and a
// reader that interleaves their records as tf.data's `interleave` does
// (deterministic, cycle_length files open, block_length records per turn).
// Internal to trainer/input.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sharding/sharding.h"
#include "storage/tfrecord.h"
#include "trainer/input/progress.h"

namespace brook::input::internal {

// The matches of a shell glob, sorted bytewise. NOT_FOUND naming the pattern
// when nothing matches.
absl::StatusOr<std::vector<std::string>> ExpandGlob(const std::string& pattern);

// The units a pipeline reads, from exactly one of: `files` (in the order
// given), `glob` (sorted matches), `units` (as given). Files become one unit
// each: id = position, records [0, end of file). Every file must exist
// (NOT_FOUND naming it); unit ids must be unique and a unit's end, when not 0,
// above its begin (INVALID_ARGUMENT).
absl::StatusOr<std::vector<sharding::WorkUnit>> ResolveUnits(
    const std::vector<std::string>& files, const std::string& glob,
    const std::vector<sharding::WorkUnit>& units);

struct InterleaveOptions {
  int cycle_length = 1;
  int block_length = 1;
  // nullopt: guessed from each file's name (storage::CompressionFromPath).
  std::optional<storage::Compression> compression;
  // Passed to the TFRecord reader: skip corrupt frames instead of failing.
  bool skip_corrupt = false;
  // If set and true, skipping to a unit's first record stops with CANCELLED
  // (that skip can be long: TFRecord files have no index). Must outlive the
  // reader.
  const std::atomic<bool>* cancelled = nullptr;
};

struct ReaderCounters {
  uint64_t files_opened = 0;
  uint64_t records = 0;          // returned (records skipped to reach a unit's begin not counted)
  uint64_t bytes = 0;            // framed bytes read, incl. skipped
  uint64_t corrupt_regions = 0;  // skip_corrupt
  uint64_t corrupt_bytes = 0;
};

// Reads the records of `units`, cycle_length units open at a time: records
// are taken round-robin from the open units, block_length per turn; a unit
// that ends is replaced by the next one in its slot when the round comes back
// to it (tf.data's interleave, deterministic order). Thread-compatible.
class InterleavedReader {
 public:
  // REQUIRES: cycle_length >= 1, block_length >= 1.
  InterleavedReader(std::vector<sharding::WorkUnit> units, const InterleaveOptions& options);
  ~InterleavedReader();
  InterleavedReader(const InterleavedReader&) = delete;
  InterleavedReader& operator=(const InterleavedReader&) = delete;

  // Returns true with *record (valid until the next call) and *id, or false
  // once every unit has been read. Errors, all sticky: opening a file fails;
  // corrupt data (DATA_LOSS naming file and offset, from the TFRecord
  // reader); a unit's range runs past its file (OUT_OF_RANGE naming unit,
  // file and record count).
  absl::StatusOr<bool> Next(std::string_view* record, RecordId* id);

  // Appends the units whose last record has been returned (or that turned
  // out empty) since the last call.
  void TakeFinished(std::vector<UnitEnd>* out);

  ReaderCounters counters() const;

 private:
  struct Slot {
    std::unique_ptr<storage::TFRecordReader> reader;
    const sharding::WorkUnit* unit = nullptr;
  };
  absl::Status Open(const sharding::WorkUnit& unit, Slot* slot);
  absl::StatusOr<bool> ReadFrom(Slot* slot, std::string_view* record);
  void Close(Slot* slot);
  void Advance() {
    block_ = 0;
    cycle_ = (cycle_ + 1) % slots_.size();
  }

  const std::vector<sharding::WorkUnit> units_;
  const InterleaveOptions options_;
  std::vector<Slot> slots_;
  size_t cycle_ = 0;      // slot whose turn it is
  int block_ = 0;         // records taken from it this turn
  size_t next_unit_ = 0;  // next unit to open
  size_t open_ = 0;       // slots holding a reader
  std::vector<UnitEnd> finished_;
  ReaderCounters closed_;  // counters of readers already closed
  absl::Status error_;
};

}  // namespace brook::input::internal
