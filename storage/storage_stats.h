// The counters the storage engines report (RocksDb::GetStats, WalWriter::stats),
// apart from the engines so that what carries them (the PS's stats, its
// clients) needs no RocksDB or WAL header.
#pragma once

#include <cstdint>

namespace brook::storage {

struct RocksDbStats {
  uint64_t block_cache_hits = 0;    // BLOCK_CACHE_HIT (data + index + filter)
  uint64_t block_cache_misses = 0;  // BLOCK_CACHE_MISS
  uint64_t bytes_read = 0;          // values returned by Get/MultiGet + iterator bytes
  uint64_t bytes_written = 0;       // bytes of keys+values issued by Write
  uint64_t sst_bytes = 0;           // "rocksdb.total-sst-files-size", all families
  // "rocksdb.estimate-pending-compaction-bytes", all families: what
  // compaction still has to rewrite; RocksDB slows then stops writes as it grows.
  uint64_t pending_compaction_bytes = 0;
  uint64_t stall_micros = 0;  // STALL_MICROS: writes held back by a write stall
  // Memory RocksDB holds (the PS's stated overhead beside its rows):
  uint64_t block_cache_bytes = 0;         // "rocksdb.block-cache-usage" (pinned blocks included)
  uint64_t block_cache_pinned_bytes = 0;  // "rocksdb.block-cache-pinned-usage"
  uint64_t memtable_bytes = 0;            // "rocksdb.cur-size-all-mem-tables", all families
  uint64_t table_reader_bytes = 0;        // "rocksdb.estimate-table-readers-mem", all families
};

struct WalStats {
  uint64_t records = 0;       // records written to files since Open
  uint64_t bytes = 0;         // bytes written to files since Open, framing included
  uint64_t group_writes = 0;  // write() batches since Open
  uint64_t syncs = 0;         // fdatasyncs since Open (kData)
  uint64_t segments = 0;      // segment files the log has now
  uint64_t last_lsn = 0;      // last LSN handed out by Add (or found on Open); 0 if none
  uint64_t write_errors = 0;  // failed group writes since Open (disk full included)
  bool failing = false;       // the last write failed for want of space; retried on Sync
};

}  // namespace brook::storage
