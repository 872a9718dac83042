// PsHandlers for a follower (a serving replica of a job's model): the change
// log and the row scan (ParameterServer::ChangesSince, ScanRows).
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/parameter_server.h"
#include "ps/rpc/ps_handlers.h"
#include "ps/wire/wire.h"

namespace brook::ps::rpc {

absl::Status PsHandlers::Changes(const v1::ChangesRequest& req, v1::ChangesResponse* resp) {
  RETURN_IF_ERROR(CheckRoute(req.route()));
  if (ps_->options().change_log_bytes == 0) {
    return absl::FailedPreconditionError(
        "this PS keeps no change log (brook ps --change-log-mib 0): a follower cannot learn what "
        "changed; start the PS with a change log");
  }
  resp->set_incarnation(ps_->startup().incarnation);
  if (req.head_only()) {
    resp->set_head(ps_->ChangeLogHead());
    return absl::OkStatus();
  }
  // Keys are 8 bytes on the wire; names and framing fit in the rest.
  const uint64_t fit = std::max<uint64_t>(1, max_reply_bytes_ / 2 / sizeof(uint64_t));
  const uint64_t max_keys =
      std::min(req.max_keys() == 0 ? kDefaultChangeKeys : req.max_keys(), fit);
  ASSIGN_OR_RETURN(ps::Changes changes, ps_->ChangesSince(req.prefix(), req.since(), max_keys));
  resp->set_next(changes.next);
  resp->set_more(changes.more);
  for (const auto& [name, keys] : changes.tables) {
    v1::ChangedTable* t = resp->add_tables();
    t->set_name(name);
    wire::EncodeKeys(keys, t->mutable_keys());
  }
  for (const std::string& name : changes.dense) resp->add_dense(name);
  // Read after the changes: head >= next.
  resp->set_head(ps_->ChangeLogHead());
  return absl::OkStatus();
}

absl::Status PsHandlers::ScanRows(const v1::ScanRowsRequest& req, const ChunkSink& emit) {
  RETURN_IF_ERROR(CheckRoute(req.route()));
  const size_t chunk_rows = req.chunk_rows() == 0 ? kDefaultScanChunkRows : req.chunk_rows();
  return ps_->ScanRows(
      req.table(), chunk_rows,
      [&](absl::Span<const uint64_t> keys, absl::Span<const float> weights) -> absl::Status {
        const size_t dim = keys.empty() ? 0 : weights.size() / keys.size();
        const size_t row_bytes = sizeof(uint64_t) + dim * sizeof(float);
        // A chunk within the reply limit, whatever the dim: split if needed.
        const size_t per_chunk = std::max<size_t>(1, max_reply_bytes_ / 2 / row_bytes);
        for (size_t at = 0; at < keys.size(); at += per_chunk) {
          const size_t n = std::min(per_chunk, keys.size() - at);
          v1::ScanRowsChunk chunk;
          chunk.set_dim(static_cast<uint32_t>(dim));
          wire::EncodeKeys(keys.subspan(at, n), chunk.mutable_keys());
          wire::EncodeFloats(weights.subspan(at * dim, n * dim), chunk.mutable_weights());
          RETURN_IF_ERROR(emit(std::move(chunk)));
        }
        return absl::OkStatus();
      });
}

}  // namespace brook::ps::rpc
