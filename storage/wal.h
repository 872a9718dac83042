// A write-ahead log. Records appended by many threads get consecutive LSNs
// (log sequence numbers, from 1) and reach the file in groups, so a parameter
// server can replay, after a crash, the updates it applied since its last
// checkpoint.
//
// On disk a log is a directory of segment files `wal-<LSN>.log`, where <LSN>
// is the segment's first LSN, 20 digits zero-padded so that names sort in LSN
// order. A segment is a sequence of frames, little-endian:
//   u32 payload_length | u32 masked crc32c(lsn bytes + payload) | u64 lsn | payload
// The LSN sits in every frame (and under the CRC) so replay can check that the
// sequence has no gap and that each segment holds what its name says.
//
// WalWriter is safe for concurrent access from multiple threads without
// external synchronization. Under Sync::kNone it runs one thread of its own,
// the early writer (WalOptions::early_write_bytes). ReplayWal reads a directory that no writer is
// changing (at start-up, before or after WalWriter::Open).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/storage_stats.h"

namespace brook::storage {

inline constexpr size_t kWalHeaderBytes = 16;  // length + crc + lsn
// A length field above this is corruption, detected before any allocation.
inline constexpr size_t kWalMaxRecordBytes = 256 << 20;

// "wal-00000000000000000001.log" for first_lsn 1.
std::string WalSegmentName(uint64_t first_lsn);

struct WalOptions {
  // kNone: write() only; survives a process crash (kill -9), not power loss.
  // kData: fdatasync after each group write; survives power loss.
  enum class Sync { kNone, kData };
  Sync sync = Sync::kNone;
  // Start a new segment file once the current one has reached this size.
  // Rotation happens between groups, so a segment can exceed it by one group.
  uint64_t segment_bytes = 64ull << 20;
  // Under kNone a background thread writes the pending records once they
  // reach this many bytes, before any Sync asks: a push's first stripes
  // reach the file while its last ones are being applied, and the Sync that
  // acknowledges it writes only the rest. 0: only Sync writes. Not under
  // kData, where each group write costs an fdatasync (~4 ms on the disk
  // measured, however little it writes): writing early would add syncs.
  uint64_t early_write_bytes = 256 << 10;
};

class WalWriter {
 public:
  // Creates `dir` if needed. On reopen it scans every segment, truncates a torn
  // tail of the last one (a record cut short by a crash: short header, short
  // payload, or bad CRC, with nothing valid after it) and continues after the
  // last valid record. Corruption followed by valid data, corruption in a
  // segment other than the last, or a gap in the LSNs is DATA_LOSS naming the
  // file and byte offset.
  static absl::StatusOr<std::unique_ptr<WalWriter>> Open(const std::string& dir,
                                                         const WalOptions& options);
  // Writes what is pending (best effort: an error here has nobody to go to)
  // and closes. No other thread may be using the writer.
  ~WalWriter();
  WalWriter(const WalWriter&) = delete;
  WalWriter& operator=(const WalWriter&) = delete;

  // Copies the record into the pending buffer and returns its LSN. Never does
  // I/O and never waits for it, so callers may hold their own locks (the PS
  // calls it under a row-stripe lock so that log order = apply order). After
  // an error the LSN is still assigned but the record is dropped; Sync reports
  // the error. A record above kWalMaxRecordBytes is such an error
  // (INVALID_ARGUMENT, sticky): the log refuses to write what replay rejects.
  // Pending records use memory until some thread calls Sync (or, under
  // kNone, until the early writer writes them).
  uint64_t Add(std::string_view record);

  // Add for a record of `size` bytes that `fill` writes straight into the
  // pending buffer (it gets `size` bytes to fill, not zeroed): the record is
  // encoded once, where it will be written from, with no copy made first.
  // `fill` runs under the writer's lock, so it must be quick and must not
  // call this writer; it is not called when the record would be dropped
  // (after an error, as for Add).
  uint64_t AddInPlace(size_t size, absl::FunctionRef<void(char* dst)> fill);

  // Returns once every record with LSN <= lsn is in the file (and fdatasync'ed
  // under kData). An lsn past the last Add means "everything added so far".
  // Group commit: the first caller to arrive writes everything pending in one
  // write() (and one fdatasync); callers arriving meanwhile wait for it and the
  // next of them writes what piled up.
  //
  // A write that fails for want of space (ENOSPC, EDQUOT) is undone: the
  // segment is truncated back to its last whole group and the group goes back
  // in front of the pending records, so nothing is dropped and LSNs stay in
  // order. That Sync, and every Sync waiting on those LSNs, returns the error
  // (RESOURCE_EXHAUSTED naming the file); failing() turns true; the next Sync
  // writes again, and succeeds once space has returned. Any other failure
  // (EIO, a failed fdatasync, a failed undo) is sticky: this and every later
  // Sync return it.
  absl::Status Sync(uint64_t lsn);

  // True while the last group write failed for want of space.
  bool failing() const;

  // Deletes whole segment files whose records all have LSN < lsn (call it once
  // a checkpoint covers them). Never deletes the segment being written.
  absl::Status DropBefore(uint64_t lsn);

  WalStats stats() const;

 private:
  struct Segment {
    uint64_t first_lsn;
    std::string path;
  };
  // Frames waiting to be written. Unlike std::string it does not zero what
  // it grows by (each byte is written once, by Add's fill) and, cleared,
  // keeps its memory, so steady state allocates nothing.
  class FrameBuffer {
   public:
    char* data() { return data_.get(); }
    size_t size() const { return size_; }
    void clear() { size_ = 0; }
    // `n` more bytes at the end, for the caller to fill.
    char* Grow(size_t n);
    void Prepend(const FrameBuffer& front);
    void swap(FrameBuffer& other) noexcept;

   private:
    std::unique_ptr<char[]> data_;
    size_t size_ = 0;
    size_t capacity_ = 0;
  };
  WalWriter(std::string dir, const WalOptions& options, uint64_t next_lsn);
  // Writes everything pending as one group. Called holding writing_'s right
  // to write (!writing_ under `lock`); unlocks `lock` around the I/O.
  absl::Status WritePending(std::unique_lock<std::mutex>& lock);
  // The early writer thread (WalOptions::early_write_bytes).
  void WriteEarly();
  bool EarlyWriteDue() const;  // REQUIRES: mu_ held
  void StartEarlyWriter();
  // Run by the one thread that holds writing_, outside mu_.
  // *retryable: the failure was for want of space and left no trace on disk.
  absl::Status WriteGroup(FrameBuffer& group, uint64_t first_lsn, bool* retryable);
  absl::Status StartSegment(uint64_t first_lsn);

  const std::string dir_;
  const WalOptions options_;

  mutable std::mutex mu_;
  std::condition_variable written_cv_;  // writing_ cleared
  // All guarded by mu_.
  uint64_t next_lsn_;
  uint64_t pending_first_lsn_;  // LSN of the first frame in pending_
  FrameBuffer pending_;         // frames not yet handed to a writing thread
  bool writing_ = false;        // a thread is writing a group outside mu_
  uint64_t written_lsn_;        // every LSN <= this is in the file
  absl::Status error_;          // sticky
  // The last want-of-space failure: Syncs waiting on LSNs <= failed_last_lsn_
  // when failures_ moved return it instead of retrying at once themselves.
  absl::Status last_failure_;
  uint64_t failures_ = 0;
  uint64_t failed_last_lsn_ = 0;
  bool failing_ = false;
  std::vector<Segment> segments_;  // by first LSN; back() is being written
  WalStats stats_;
  bool stopping_ = false;             // the early writer is to exit
  std::condition_variable early_cv_;  // an early write may be due, or stopping_

  bool early_ = false;        // set before early_writer_ starts, constant after
  std::thread early_writer_;  // started by Open under kNone; joined first by ~WalWriter

  // Owned by the thread holding writing_ (and by Open and the destructor).
  int fd_ = -1;
  std::string segment_path_;
  uint64_t segment_size_ = 0;
  FrameBuffer group_;  // the group being written; swapped with pending_ to reuse memory
};

struct WalReplayStats {
  uint64_t records = 0;    // records passed to fn
  uint64_t bytes = 0;      // their payload bytes
  uint64_t first_lsn = 0;  // first and last LSN passed to fn; 0 if none
  uint64_t last_lsn = 0;
  uint64_t torn_tail_bytes = 0;  // bytes of a torn record ending the last segment
};

// Calls fn(lsn, record) for every record with LSN >= from_lsn, in LSN order.
// `record` is valid only during the call. A torn tail at the end of the last
// segment ends the replay normally (counted in torn_tail_bytes). Anything else
// bad is DATA_LOSS naming the file and offset, including a log that starts
// after from_lsn (> 1) when records before its start were asked for. Records
// before the damage have been passed to fn by then. An empty or missing dir
// replays nothing. If fn returns an error, replay stops and returns it.
// Segments whose records all lie below from_lsn are skipped unread; memory
// use is one segment.
absl::StatusOr<WalReplayStats> ReplayWal(
    const std::string& dir, uint64_t from_lsn,
    absl::FunctionRef<absl::Status(uint64_t lsn, std::string_view record)> fn);

}  // namespace brook::storage
