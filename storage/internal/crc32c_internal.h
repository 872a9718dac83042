// Detail of storage/crc32c.h: the SSE4.2 kernel lives in its own translation
// unit (crc32c_sse42.cc, the only file built with -msse4.2) so that no inline
// code compiled for SSE4.2 can leak into paths that run on older CPUs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace brook::storage::crc32c::internal {

// CRC32C of `data` continuing from `init_crc`, with the SSE4.2 crc32
// instruction. REQUIRES: the CPU supports SSE4.2 (callers check once).
uint32_t ExtendSse42(uint32_t init_crc, const char* data, size_t n);

// True when this build has an SSE4.2 kernel at all (x86-64 only).
bool Sse42Compiled();

}  // namespace brook::storage::crc32c::internal
