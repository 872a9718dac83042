// Where each batch's records came from, and the per-unit committed offset
// that exactly-once training needs (docs/architecture.md "Exactly once per epoch").
//
// Every batch the input pipeline returns carries a BatchProvenance: for each
// work unit, the ranges of record indexes it settles. The pipeline does not
// decide when a unit's offset is committed. The trainer does, with a
// UnitProgress: it Tracks each batch as it is handed out, Acks the batch once
// its pushes were acknowledged, and reads Committed(unit), the low-water
// mark: every record of the unit before it has been acknowledged. With
// shuffling, batches complete records out of order, so the mark only moves
// over a contiguous acknowledged prefix.
//
//   UnitProgress progress(pipeline->units());
//   while (auto batch = pipeline->Next().value()) {
//     progress.Track(batch->provenance).IgnoreError();  // fresh sequence: cannot fail
//     ... train; when the pushes of batch s are acked: progress.Ack(s) ...
//     chief->Report(unit, progress.Committed(unit));
//   }
//
// UnitProgress is thread-safe (acks may arrive on RPC callback threads).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "sharding/sharding.h"

namespace brook::input {

// Records [begin, end) of work unit `unit_id` (record indexes in its file,
// counted from the first record of the file, not of the unit).
struct RecordRange {
  uint32_t unit_id = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  friend bool operator==(const RecordRange&, const RecordRange&) = default;
};

// The reader reached the end of a unit: its records are [begin, end). For a
// unit given "to end of file" (end 0) this is the first time `end` is known.
struct UnitEnd {
  uint32_t unit_id = 0;
  uint64_t end = 0;
  friend bool operator==(const UnitEnd&, const UnitEnd&) = default;
};

struct BatchProvenance {
  // 0, 1, 2, ... in the order Pipeline::Next returns batches.
  uint64_t sequence = 0;
  // Epochs count from 0. A batch never spans two epochs.
  int epoch = 0;
  // Every record this batch settles: its rows, plus records that will never
  // be a row and were discarded since the previous batch (bad examples under
  // skip_bad_examples, a dropped remainder). Sorted by (unit_id, begin),
  // disjoint, adjacent ranges merged. Without shuffling a batch is typically
  // one range per unit it touches; with shuffling up to one per row.
  std::vector<RecordRange> ranges;
  // How many records of `ranges` are not rows of the batch.
  uint64_t discarded = 0;
  // Units whose last record the reader had read when this batch was formed.
  std::vector<UnitEnd> unit_ends;

  // Records covered by `ranges` (rows + discarded).
  uint64_t num_records() const;
};

// A unit's state in a UnitProgress.
struct UnitOffset {
  uint32_t unit_id = 0;
  uint64_t committed = 0;  // low-water mark
  uint64_t end = 0;        // 0 until known (a UnitEnd was tracked or the unit had an end)
  bool complete = false;   // end known and committed == end
};

class UnitProgress {
 public:
  // `units` gives each unit's first record (its mark starts there) and, if
  // not 0, its end. Units not listed start at record 0 with an unknown end
  // (a pipeline over plain files: unit id = file position). Provenance of
  // epochs other than `epoch` is refused: use one UnitProgress per epoch.
  explicit UnitProgress(absl::Span<const sharding::WorkUnit> units = {}, int epoch = 0);
  UnitProgress(const UnitProgress&) = delete;
  UnitProgress& operator=(const UnitProgress&) = delete;

  // Registers a batch handed out for training. INVALID_ARGUMENT for another
  // epoch; ALREADY_EXISTS if its sequence is tracked and not yet acked. A
  // batch's UnitEnds take effect at once (they only say where units end).
  // Tracking and acking a batch twice is harmless: acks are a set union.
  absl::Status Track(const BatchProvenance& provenance);
  // Batch `sequence` was acknowledged: its records count as done and marks
  // move up. NOT_FOUND if it is not tracked (or was acked already).
  absl::Status Ack(uint64_t sequence);
  // Acks the batches of one optimizer step together and counts the step, so
  // that CommittedSteps() never reads half a step. NOT_FOUND (nothing acked)
  // if any of them is not tracked.
  absl::Status AckStep(absl::Span<const uint64_t> sequences);
  // Counts `steps` more steps (ones a resumed unit skipped: acked by an
  // earlier holder) without acking anything.
  void AddSteps(uint64_t steps);

  // A unit's mark with the steps acked so far (AckStep, AddSteps), read
  // together: the records before `committed` are exactly what those steps
  // trained, when batches are acked in order (a trainer's pushes are).
  struct StepMark {
    uint64_t committed = 0;
    uint64_t steps = 0;
  };
  StepMark CommittedSteps(uint32_t unit_id) const;

  // Low-water mark of a unit: every record of it before this index has been
  // acknowledged. A unit never seen: its begin (0 if not listed).
  uint64_t Committed(uint32_t unit_id) const;
  // End known and every record of the unit acknowledged.
  bool Complete(uint32_t unit_id) const;
  // Acknowledged records above the mark (holes below them still pending), so
  // a resumed unit could skip them. Sorted, merged.
  std::vector<RecordRange> AckedAboveMark(uint32_t unit_id) const;
  // Every unit listed or seen, by unit id.
  std::vector<UnitOffset> Offsets() const;
  // Tracked batches not yet acked.
  size_t pending_batches() const;

 private:
  struct Unit {
    uint64_t committed = 0;
    uint64_t end = 0;  // 0 = unknown
    // Acked records above `committed`: begin -> end, disjoint, not adjacent,
    // all begins > committed.
    std::map<uint64_t, uint64_t> acked;
  };
  Unit& UnitFor(uint32_t unit_id);  // REQUIRES: mu_ held
  static void AddAcked(Unit* unit, uint64_t begin, uint64_t end);

  const int epoch_;
  mutable std::mutex mu_;
  // Protected by mu_.
  std::map<uint32_t, Unit> units_;
  uint64_t steps_ = 0;
  absl::flat_hash_map<uint64_t, std::vector<RecordRange>> pending_;
};

namespace internal {

// One record: its unit and its index in the unit's file.
struct RecordId {
  uint32_t unit_id = 0;
  uint64_t index = 0;
};

// Sorts `ids` (no duplicates) and merges runs into ranges, appending to *out
// (which is then re-sorted and merged as a whole). Reuses ids' storage.
void AppendRanges(std::vector<RecordId>* ids, std::vector<RecordRange>* out);

}  // namespace internal
}  // namespace brook::input
