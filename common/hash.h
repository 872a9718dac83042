// Brook's stable 64-bit hash for turning feature strings into ids.
//
// It is XXH64 (xxHash, 64-bit variant, seed 0 by default) implemented from
// the published specification. It is part of the data format: ids written
// into checkpoints and exports depend on it, so it must never change. Tests
// pin it to the reference vectors.
#pragma once

#include <cstdint>
#include <string_view>

namespace brook {

uint64_t Hash64(std::string_view data, uint64_t seed = 0);

// Mixes two 64-bit values (e.g. a table id and a key); a bijection in `key`
// for a fixed `salt` (splitmix64 finalizer over key ^ rotated salt).
uint64_t Mix64(uint64_t salt, uint64_t key);

}  // namespace brook
