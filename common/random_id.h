// Random 64-bit identifiers that are never 0 (0 means "none" wherever these
// are used: PS client ids, PS incarnations). From std::random_device, so two
// processes started at the same instant still differ.
#pragma once

#include <cstdint>

namespace brook {

uint64_t RandomNonZeroId();

}  // namespace brook
