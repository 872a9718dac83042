#include "ps/client/ps_client.h"

#include <random>

namespace brook::ps {
namespace {

uint64_t RandomClientId() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) ^ rd();  // 0 disables dedup
  return id;
}

}  // namespace

PsClient::PsClient(int32_t num_shards, uint64_t client_id)
    : num_shards_(num_shards), client_id_(client_id != 0 ? client_id : RandomClientId()) {}

}  // namespace brook::ps
