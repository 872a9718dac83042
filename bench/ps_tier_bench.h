// `brook bench ps` part (c): the PS with a table at 10x its memory budget
// (most rows in the RocksDB tier), in process, beside a bare RocksDB
// MultiGet / WriteBatch of the same rows with the same options measured in
// the same run; the WAL's cost on pushes (off / on / on with fdatasync, each
// in slices alternating with WAL off; fdatasync also on several threads,
// beside a bare write + fdatasync of the same bytes); and
// checkpoint and restore time per GB; and table churn: whether creating and
// dropping tables slows as the PS holds more of them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace brook::bench {

struct PsTierBenchOptions {
  int64_t rows = 500000;  // table rows; the memory budget holds a tenth
  int dim = 64;
  int batch = 4096;
  double seconds = 1.0;
  // The WAL figures alternate with WAL off in this many slice pairs each
  // (bench/paired_rate.h).
  int slices = 8;
  // Pushing threads of the fdatasync group-commit figure: a push waits for
  // its own fdatasync (~4 ms on the VM disk measured), so one thread gets
  // one push per sync; concurrent pushes share one.
  int wal_threads = 8;
  uint64_t seed = 1;
  // Where the data dirs go (a fresh subdirectory is made and removed).
  std::string work_dir = "/tmp";
  // Table churn: tables created (24 a job, each pushed once under its
  // budget) on a data-dir PS and on a memory-only one, then dropped; the
  // creation rate of the first 100 beside the last 100. At least 200.
  int churn_tables = 600;
};

absl::Status RunPsTierBench(const PsTierBenchOptions& options, std::ostream& out,
                            nlohmann::json* result);

}  // namespace brook::bench
