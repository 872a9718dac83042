// GrpcPsClient for a follower (a serving replica of a job's model): the
// change log (Changes RPC) and the row scan (ScanRows, server streaming).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/status_mapping.h"
#include "common/status_macros.h"
#include "ps/client/change_follow.h"
#include "ps/client/grpc_ps_client.h"
#include "ps/client/grpc_ps_client_internal.h"
#include "ps/wire/wire.h"
#include "security/bearer_token.h"

namespace brook::ps {

using grpc_client_internal::Done;
using grpc_client_internal::Stub;

absl::StatusOr<ChangeSet> GrpcPsClient::ChangesSince(std::string_view prefix,
                                                     const ChangeCursor& cursor,
                                                     uint64_t max_keys_per_shard) {
  auto read = [&](absl::Span<const ShardChangeAsk> asks,
                  bool head_only) -> absl::StatusOr<std::vector<absl::StatusOr<ShardChanges>>> {
    std::vector<v1::ChangesRequest> reqs(asks.size());
    std::vector<v1::ChangesResponse> resps(asks.size());
    std::vector<Call> calls(asks.size());
    for (size_t i = 0; i < asks.size(); ++i) {
      v1::ChangesRequest& req = reqs[i];
      req.set_prefix(std::string(prefix));
      req.set_since(asks[i].since);
      req.set_max_keys(std::max<uint64_t>(1, max_keys_per_shard));
      req.set_head_only(head_only);
      if (options_.check_route) {
        req.mutable_route()->set_shard_index(asks[i].shard);
        req.mutable_route()->set_num_shards(num_shards());
      }
      calls[i].shard = asks[i].shard;
      calls[i].issue = [req = &reqs[i], resp = &resps[i]](Stub* stub, grpc::ClientContext* ctx,
                                                          Done done) {
        stub->async()->Changes(ctx, req, resp, std::move(done));
      };
    }
    // OUT_OF_RANGE is an answer (copy everything), not a failure.
    RETURN_IF_ERROR(Run(calls, CallDeadline(), 1u << grpc::StatusCode::OUT_OF_RANGE));
    std::vector<absl::StatusOr<ShardChanges>> out;
    out.reserve(asks.size());
    std::vector<uint64_t> scratch;
    for (size_t i = 0; i < asks.size(); ++i) {
      if (!calls[i].status.ok()) {
        out.push_back(absl::OutOfRangeError(
            absl::StrCat("PS shard ", asks[i].shard, ": ", calls[i].status.error_message())));
        continue;
      }
      const v1::ChangesResponse& r = resps[i];
      ShardChanges c{.incarnation = r.incarnation(),
                     .next = head_only ? r.head() : r.next(),
                     .more = r.more()};
      for (const v1::ChangedTable& t : r.tables()) {
        ASSIGN_OR_RETURN(absl::Span<const uint64_t> keys,
                         wire::DecodeKeys(t.keys(), &scratch, "changes: keys"));
        c.tables.emplace_back(t.name(), std::vector<uint64_t>(keys.begin(), keys.end()));
      }
      c.dense.assign(r.dense().begin(), r.dense().end());
      out.push_back(std::move(c));
    }
    return out;
  };
  return FollowChanges(num_shards(), prefix, cursor, kMaxChangeRounds, read);
}

absl::Status GrpcPsClient::ScanRows(std::string_view table, const ChunkFn& chunk) {
  v1::ScanRowsRequest req;
  req.set_table(std::string(table));
  req.set_chunk_rows(kScanChunkRows);
  std::vector<uint64_t> key_scratch;
  std::vector<float> weight_scratch;
  for (int32_t s = 0; s < num_shards(); ++s) {
    if (options_.check_route) {
      req.mutable_route()->set_shard_index(s);
      req.mutable_route()->set_num_shards(num_shards());
    }
    const absl::Time deadline = absl::Now() + options_.admin_deadline;
    const absl::Time retry_until = absl::Now() + options_.admin_retry_window;
    absl::Duration backoff = options_.initial_backoff;
    while (true) {
      if (cancelled()) return absl::CancelledError("PS client cancelled: the process is stopping");
      grpc::ClientContext ctx;
      if (!options_.token.token.empty()) {
        ctx.AddMetadata(security::kAuthorizationHeader,
                        security::AuthorizationValue(options_.token.token));
      }
      ctx.set_deadline(absl::ToChronoTime(deadline));
      std::unique_ptr<grpc::ClientReader<v1::ScanRowsChunk>> reader =
          shards_[s]->Pick()->ScanRows(&ctx, req);
      v1::ScanRowsChunk c;
      bool any = false;
      absl::Status handed;  // the caller's chunk() error, or a bad chunk
      while (handed.ok() && reader->Read(&c)) {
        any = true;
        if (cancelled()) {
          handed = absl::CancelledError("PS client cancelled: the process is stopping");
          break;
        }
        absl::StatusOr<absl::Span<const uint64_t>> keys =
            wire::DecodeKeys(c.keys(), &key_scratch, "scan rows: keys");
        absl::StatusOr<absl::Span<const float>> weights =
            wire::DecodeFloats(c.weights(), &weight_scratch, "scan rows: weights");
        if (!keys.ok()) {
          handed = keys.status();
        } else if (!weights.ok()) {
          handed = weights.status();
        } else if (weights->size() != keys->size() * c.dim()) {
          handed = absl::DataLossError(absl::StrCat("PS shard ", s, ": scan rows chunk of ",
                                                    keys->size(), " keys x dim ", c.dim(), " has ",
                                                    weights->size(), " floats"));
        } else {
          handed = chunk(*keys, *weights);
        }
      }
      if (!handed.ok()) ctx.TryCancel();
      const grpc::Status status = reader->Finish();
      RETURN_IF_ERROR(handed);
      if (status.ok()) break;
      // Nothing handed out yet: a PS that is unreachable (or busy with other
      // scans) may be asked again.
      const absl::Duration sleep = backoff;
      if (!any && status.error_code() == grpc::StatusCode::UNAVAILABLE &&
          absl::Now() + sleep < std::min(deadline, retry_until)) {
        if (!SleepUnlessCancelled(sleep)) continue;
        backoff = std::min(backoff * 2, options_.max_backoff);
        retries_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      Call failed;
      failed.shard = s;
      failed.status = status;
      return Explain(failed);
    }
  }
  return absl::OkStatus();
}

}  // namespace brook::ps
