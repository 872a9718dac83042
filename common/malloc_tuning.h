// TuneMalloc: the glibc malloc settings every `brook` process runs with.
//
// Why: by default glibc serves an allocation of 128 KiB or more (the
// threshold adapts, up to 32 MiB) with its own mmap, and hands the top of a
// heap back to the kernel once more than twice that is free. A PS pull reply
// or push request (0.1-1 MiB, allocated and freed once per RPC by gRPC,
// protobuf and Brook) then costs a fresh mapping and a page fault per 4 KiB
// page on every request, and page faults are expensive on the virtual
// machines Brook runs on. With the thresholds raised, those buffers are
// reused from the heap: gRPC pulls of 4096 rows ran 1.3-2x and pushes 2-5x
// faster on the 2-core CI machine (BENCHMARKS.md, issue 3).
//
// The cost: up to trim_threshold bytes of freed memory per heap stay mapped
// (reused by the next requests, not returned to the kernel). The PS's row
// arena does not go through malloc, so this bounds only request buffers.
//
// Skipped, leaving glibc's defaults or the user's own choice, when
// GLIBC_TUNABLES sets any glibc.malloc tunable, when BROOK_MALLOC_TUNING=0,
// or when LD_PRELOAD puts another allocator in place.
//
// Thread-safe; call TuneMalloc first thing in main(), before threads start.
#pragma once

#include <cstddef>
#include <string>

namespace brook {

struct MallocTuning {
  bool applied = false;
  size_t mmap_threshold = 0;  // bytes; 0 when not applied
  size_t trim_threshold = 0;
  std::string description;  // what the process runs with, for logs and benchmarks
};

// The values TuneMalloc sets: the largest mmap threshold glibc accepts on
// 64-bit (half its 64 MiB heap size), and room for a few hundred in-flight
// request buffers per heap before trimming.
inline constexpr size_t kMallocMmapThreshold = size_t{32} << 20;
inline constexpr size_t kMallocTrimThreshold = size_t{512} << 20;

// Applies the settings unless skipped (see above); idempotent.
MallocTuning TuneMalloc();

// Hands the free pages inside every malloc heap back to the kernel
// (malloc_trim(0)): the raised trim threshold keeps freed request buffers
// mapped, and a burst of large requests (a PS's tiered pushes, a restore)
// otherwise left a few hundred MiB free but resident for good (docs/sizing.md).
// Long-lived processes call it every few seconds, off their request path.
// Holds each heap's lock while it walks it (milliseconds). Does nothing and
// returns false when another allocator was preloaded.
bool TrimMalloc();

// What this process's allocator is: the last TuneMalloc() result's
// description, or the environment's allocator if TuneMalloc was not called.
std::string MallocDescription();

}  // namespace brook
