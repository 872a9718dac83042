// The trainer's input pipeline, tf.data's in C++: TFRecord files (or work
// units leased by the chief) are read interleaved, shuffled, batched, parsed
// in parallel into ColumnarBatches, optionally cached, and prefetched:
//
//   read thread:   interleave cycle_length files ─► shuffle buffer ─► record batches
//                  (epoch 2+ with cache: plans batches of cached rows instead)
//   parse workers: parse (or copy cached rows), in parallel, autotuned
//                  ─► re-ordering prefetch window ─► Next()
//   Next():        exact batch_size re-batching, provenance, epoch ends
//
// Batches never span epochs; each epoch's shuffle buffer drains at its end
// (tf.data's shuffle().batch() inside repeat()).
//
// Output order is deterministic for given options and seed, whatever the
// thread count. Every batch carries its provenance (progress.h).
//
// Memory is bounded at every stage (records of a stage, R = batch_size,
// T = max_parse_threads, P = prefetch or max_prefetch when autotuned):
//   read:     cycle_length open readers (a mapped file keeps a sliding
//             resident window, <= ~96 MiB ahead + 16-32 MiB behind, clean
//             page cache; read(2)/compressed: 256 KiB buffers + the largest
//             record + zlib's window) + shuffle_buffer records (each slot
//             keeps the capacity of the largest record it held) + one
//             record batch being filled (R)
//   queue:    read_queue_depth record batches (R records each)
//   parse:    one record batch + one parsed batch per worker (<= T)
//   prefetch: P parsed batches, in order or not (the window blocks a worker
//             whose batch is P or more ahead of the consumer)
//   Next():   < R pending rows + at most 3 finished batches (one is held
//             until the next chunk arrives, so an epoch's trailing
//             provenance can ride on its last batch)
//   cache:    the whole parsed epoch (by design; stats().cache_bytes)
//
// Thread safety: Next() requires external synchronization (one consumer);
// stats() and Cancel() may be called from any thread at any time.
//
//   PipelineOptions options;
//   options.glob = "/data/train-*.tfrecord";
//   options.shuffle_buffer = 10000;
//   auto pipeline = Pipeline::Create(spec, options).value();
//   while (true) {
//     absl::StatusOr<std::optional<Batch>> batch = pipeline->Next();
//     if (!batch.ok()) return batch.status();   // corrupt data, bad example
//     if (!batch->has_value()) break;           // every epoch done
//     Train((*batch)->data);
//   }
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "features/feature_spec.h"
#include "sharding/sharding.h"
#include "storage/tfrecord.h"
#include "trainer/input/columnar_batch.h"
#include "trainer/input/progress.h"

namespace brook::input {

struct PipelineOptions {
  // Sources: exactly one. Files are read in the order given; a glob is
  // expanded and sorted (no match: NOT_FOUND naming it). Each file is one
  // unit (id = position, whole file). Units are (id, path, [begin, end)
  // record range, end 0 = to end of file), as the chief leases them.
  std::vector<std::string> files;
  std::string glob;
  std::vector<sharding::WorkUnit> units;
  // nullopt: from each file name (".gz" -> GZIP, ".zlib" -> ZLIB).
  std::optional<storage::Compression> compression;

  // Units read at once, records per turn (tf.data interleave's meaning).
  // More open files mix sources better at the cost of one reader each.
  int cycle_length = 4;
  int block_length = 1;

  // Parse workers; 0 = autotune between 1 and max_parse_threads (and the
  // core count; autotune.h has the rule).
  int parse_threads = 0;
  int max_parse_threads = 8;
  // Record batches waiting for a parse worker; 0 = max_parse_threads, which
  // keeps every worker fed without holding more.
  int read_queue_depth = 0;

  // Records in the shuffle buffer; 0 = no shuffling. The order is a function
  // of seed and epoch only: reproducible, and different every epoch.
  size_t shuffle_buffer = 0;
  uint64_t seed = 1;
  // With shuffling, also permute the unit order each epoch.
  bool shuffle_units = false;

  int batch_size = 256;
  // The last, short batch of each epoch: dropped (its records still appear
  // in provenance as discarded) or returned.
  bool drop_remainder = false;

  // Parsed batches ready ahead of the consumer; 0 = autotune (2 up to
  // max_prefetch). 4 absorbs a parse hiccup of a few batches.
  int prefetch = 4;
  int max_prefetch = 16;

  // Keep epoch 1's parsed batches in memory and serve later epochs from them
  // (no reading, no parsing). For datasets that fit in memory; with
  // shuffling, each later epoch is a fresh uniform permutation of the rows.
  bool cache = false;

  // 0 = repeat forever.
  int epochs = 1;

  // A record that does not parse (tf.train.Example malformed, or violating
  // the spec's policy) is an error naming file and record index, or with
  // this set is skipped and counted (stats().bad_examples).
  bool skip_bad_examples = false;
  // Corrupt TFRecord framing is an error naming file and offset, or with
  // this set is skipped and counted (stats().corrupt_regions).
  bool skip_corrupt_records = false;

  // Test hook: runs on a parse worker before each record batch is parsed.
  std::function<void()> TEST_before_parse;

  absl::Status Validate() const;
};

// One stage's time split and output. Seconds are summed over the stage's
// threads (wall time). A wait still in progress is counted up to now.
struct StageStats {
  uint64_t items = 0;              // what the stage produced (see PipelineStats)
  double busy_seconds = 0;         // working on items
  double wait_input_seconds = 0;   // starved: blocked on an empty input
  double wait_output_seconds = 0;  // back-pressure: blocked on a full output
  int threads = 0;
};

// A consistent-enough snapshot (each counter read atomically).
struct PipelineStats {
  StageStats read;      // items: records read from files (0 in cached epochs)
  StageStats parse;     // items: record batches parsed
  StageStats consumer;  // items: batches returned; wait_input: the trainer waiting for data
  uint64_t files_opened = 0;
  uint64_t bytes_read = 0;         // TFRecord framed bytes
  uint64_t corrupt_regions = 0;    // skipped under skip_corrupt_records
  uint64_t corrupt_bytes = 0;      // their bytes
  uint64_t examples_parsed = 0;    // rows produced by parse workers
  uint64_t bad_examples = 0;       // skipped under skip_bad_examples
  uint64_t remainder_dropped = 0;  // rows dropped by drop_remainder
  uint64_t rows_returned = 0;
  uint64_t batches_from_cache = 0;  // chunks of rows served by the cache
  uint64_t cache_bytes = 0;
  int epochs_completed = 0;  // epochs whose last batch Next() returned
  int parse_threads = 0;     // current (autotune moves it)
  int prefetch = 0;          // current window size
  int autotune_steps = 0;    // changes made by the autotuner
  ParseStats parse_policy;   // missing / mismatched per feature
};

struct Batch {
  ColumnarBatch data;  // num_rows == batch_size except an epoch's remainder
  BatchProvenance provenance;
  int epoch() const { return provenance.epoch; }
};

class Pipeline {
 public:
  // INVALID_ARGUMENT for bad options or spec; NOT_FOUND for a missing file
  // or a glob without match. Starts the threads; nothing is read before.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Create(const FeatureSpec& spec,
                                                          const PipelineOptions& options);
  // Cancels and joins every thread.
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The next batch, blocking until it is ready, or nullopt after the last
  // epoch. Errors surface in stream order (complete batches before the bad
  // record come first) and are sticky: DATA_LOSS for corrupt framing (file,
  // offset), OUT_OF_RANGE for a unit range past its file, the parser's code
  // for a bad example (file, record index), CANCELLED after Cancel().
  // A batch of 0 rows happens only for an epoch that returns no batch with
  // rows but has discarded records (bad examples, a dropped remainder) or
  // unit ends to report: it carries only provenance; ack it, do not train.
  absl::StatusOr<std::optional<Batch>> Next();

  PipelineStats stats() const;
  // Stops every stage promptly, even with full queues or no consumer;
  // Next() then returns CANCELLED. Idempotent.
  void Cancel();
  // The units read, resolved from files/glob/units (for UnitProgress).
  const std::vector<sharding::WorkUnit>& units() const;

 private:
  class Impl;
  explicit Pipeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace brook::input
