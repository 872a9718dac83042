#include "ps/client/grpc_ps_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <functional>
#include <random>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "brook/v1/node.grpc.pb.h"
#include "brook/v1/ps.grpc.pb.h"
#include "common/endpoint_error.h"
#include "common/rpc/grpc_error.h"
#include "common/rpc/status_mapping.h"
#include "common/status_macros.h"
#include "ps/client/grpc_ps_client_internal.h"
#include "ps/client/key_plan.h"
#include "ps/config_codec.h"
#include "ps/wire/precision.h"
#include "ps/wire/proto_convert.h"
#include "ps/wire/pull_reply.h"
#include "ps/wire/wire.h"
#include "sharding/sharding.h"

namespace brook::ps {
namespace {

using grpc_client_internal::Done;
using grpc_client_internal::Stub;

bool Retryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

// RESOURCE_EXHAUSTED that the PS marked transient (its disk is full), not a
// key limit's or a memory budget's, which no retry changes.
template <typename Call>
bool OutOfSpace(const Call& c) {
  if (c.status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED || c.context == nullptr) {
    return false;
  }
  const auto& trailers = c.context->GetServerTrailingMetadata();
  return trailers.find(brook::rpc::kTransientTrailer) != trailers.end();
}

double Jitter() {
  thread_local std::minstd_rand rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.5, 1.0)(rng);
}

// One RPC's slice of a shard's keys: [begin, end) of plan.shard_keys(shard).
struct Part {
  int32_t shard = 0;
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

std::vector<Part> SplitParts(const KeyPlan& plan, size_t keys_per_request) {
  std::vector<Part> parts;
  for (int32_t s = 0; s < plan.num_shards(); ++s) {
    const size_t n = plan.shard_keys(s).size();
    for (size_t b = 0; b < n; b += keys_per_request) {
      parts.push_back({s, b, std::min(n, b + keys_per_request)});
    }
  }
  return parts;
}

absl::Status CheckOptions(const GrpcPsClientOptions& o) {
  if (o.deadline <= absl::ZeroDuration() || o.attempt_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("deadline and attempt_timeout must be positive");
  }
  if (o.initial_backoff <= absl::ZeroDuration() || o.max_backoff < o.initial_backoff) {
    return absl::InvalidArgumentError("need 0 < initial_backoff <= max_backoff");
  }
  if (o.max_message_bytes < (1 << 20) || o.max_request_bytes == 0 ||
      o.max_request_bytes > static_cast<uint64_t>(o.max_message_bytes) / 2) {
    return absl::InvalidArgumentError(
        "need max_message_bytes >= 1 MiB and 0 < max_request_bytes <= max_message_bytes / 2");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcPsClient>> GrpcPsClient::Create(
    const GrpcPsClientOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  if (options.addresses.empty()) {
    return absl::InvalidArgumentError("no PS addresses");
  }
  if (options.channels_per_shard < 1 || options.channels_per_shard > 64) {
    return absl::InvalidArgumentError("channels_per_shard must be in [1, 64]");
  }
  GrpcPsClientOptions checked = options;
  ASSIGN_OR_RETURN(checked.token, security::ForAddresses(options.token, options.addresses,
                                                         options.tls.enabled(), "the PS token"));
  grpc::ChannelArguments tls_args;
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                   security::ChannelCredentials(options.tls, &tls_args));
  std::vector<std::unique_ptr<Shard>> shards;
  for (const std::string& address : options.addresses) {
    if (address.empty()) return absl::InvalidArgumentError("empty PS address");
    auto shard = std::make_unique<Shard>();
    shard->address = address;
    for (int c = 0; c < options.channels_per_shard; ++c) {
      grpc::ChannelArguments args = tls_args;
      args.SetMaxReceiveMessageSize(options.max_message_bytes);
      args.SetMaxSendMessageSize(options.max_message_bytes);
      // A private subchannel pool plus a distinct argument per channel gives
      // each channel its own TCP connection instead of one shared one.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt("brook.channel_index", c);
      // Reconnect to a restarted PS within ~100 ms-2 s, not gRPC's default
      // 1 s growing to 120 s: retries already pace themselves.
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
      shard->stubs.push_back(
          std::make_unique<Stub>(grpc::CreateCustomChannel(address, creds, args)));
    }
    shards.push_back(std::move(shard));
  }
  return std::unique_ptr<GrpcPsClient>(new GrpcPsClient(checked, std::move(shards)));
}

absl::StatusOr<std::unique_ptr<GrpcPsClient>> GrpcPsClient::FromChannels(
    std::vector<std::shared_ptr<grpc::Channel>> channels, const GrpcPsClientOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  if (channels.empty()) return absl::InvalidArgumentError("no PS channels");
  std::vector<std::unique_ptr<Shard>> shards;
  for (size_t i = 0; i < channels.size(); ++i) {
    auto shard = std::make_unique<Shard>();
    shard->address = absl::StrCat("channel ", i);
    shard->stubs.push_back(std::make_unique<Stub>(channels[i]));
    shards.push_back(std::move(shard));
  }
  return std::unique_ptr<GrpcPsClient>(new GrpcPsClient(options, std::move(shards)));
}

GrpcPsClient::GrpcPsClient(const GrpcPsClientOptions& options,
                           std::vector<std::unique_ptr<Shard>> shards)
    : PsClient(static_cast<int32_t>(shards.size()), options.client_id),
      options_(options),
      shards_(std::move(shards)),
      retry_window_ns_(absl::ToInt64Nanoseconds(options.deadline)),
      admin_retry_window_ns_(absl::ToInt64Nanoseconds(options.admin_retry_window)) {}

GrpcPsClient::~GrpcPsClient() = default;

size_t GrpcPsClient::KeysPerRequest(size_t dim) const {
  // Key (8 bytes) plus its row of floats.
  return std::max<size_t>(1, options_.max_request_bytes / (sizeof(uint64_t) + dim * sizeof(float)));
}

absl::Status GrpcPsClient::Run(std::vector<Call>& calls, absl::Time deadline, uint32_t ok_codes,
                               absl::Duration attempt, absl::Time retry_until) {
  if (attempt <= absl::ZeroDuration()) attempt = options_.attempt_timeout;
  if (calls.empty()) return absl::OkStatus();
  const absl::Time start = absl::Now();
  std::vector<Call*> pending;
  pending.reserve(calls.size());
  for (Call& c : calls) pending.push_back(&c);
  absl::Duration backoff = options_.initial_backoff;
  // Why each shard's retryable failures failed (a refused connect, ...):
  // asked once per shard per call, it names the cause in the episode and
  // the final error instead of gRPC's vaguer text.
  std::vector<std::optional<absl::Status>> why(shards_.size());
  // This call's share in retrying(): counted from its first retry to its end.
  bool in_episode = false;
  absl::Cleanup leave_episode = [&] {
    if (!in_episode) return;
    absl::MutexLock lock(&episode_mu_);
    if (--retrying_calls_ == 0) episode_.reset();
  };
  while (true) {
    if (cancelled()) return absl::CancelledError("PS client cancelled: the process is stopping");
    const absl::Time attempt_deadline = std::min(deadline, absl::Now() + attempt);
    for (Call* c : pending) {
      c->context = std::make_unique<grpc::ClientContext>();
      // Metadata, not call credentials: gRPC drops call credentials on a
      // plaintext channel even to 127.0.0.1 (Create refused anywhere else).
      if (!options_.token.token.empty()) {
        c->context->AddMetadata(security::kAuthorizationHeader,
                                security::AuthorizationValue(options_.token.token));
      }
      c->context->set_deadline(absl::ToChronoTime(attempt_deadline));
      c->context->set_wait_for_ready(c->wait_for_ready);
      ++c->attempts;
    }
    // Admin calls (a given `attempt`) may take minutes of work: never "silent".
    AwaitRound(pending,
               attempt == options_.attempt_timeout ? options_.silent_notice : absl::ZeroDuration());
    if (cancelled()) return absl::CancelledError("PS client cancelled: the process is stopping");
    std::vector<Call*> retry;
    Call* failed = nullptr;
    for (Call* c : pending) {
      const grpc::StatusCode code = c->status.error_code();
      if (code == grpc::StatusCode::OK || (ok_codes & (1u << code)) != 0) continue;
      if (OutOfSpace(*c)) {
        retry.push_back(c);
        continue;
      }
      if (Retryable(code) && !why[c->shard].has_value()) why[c->shard] = Explain(*c);
      // A refused or silent PS may come back; an address that is no PS won't.
      if (Retryable(code) && !IsWrongEndpoint(*why[c->shard])) {
        retry.push_back(c);
      } else if (failed == nullptr) {
        failed = c;
      }
    }
    if (failed == nullptr && retry.empty()) return absl::OkStatus();
    const absl::Duration sleep = backoff * Jitter();
    if (failed == nullptr && absl::Now() + sleep < std::min(deadline, retry_until)) {
      if (!in_episode) {
        in_episode = true;
        const Call& c = *retry.front();
        std::optional<RetryEpisode> started;
        {
          absl::MutexLock lock(&episode_mu_);
          if (retrying_calls_++ == 0) {
            episode_ = RetryEpisode{.shard = c.shard,
                                    .address = shards_[c.shard]->address,
                                    .out_of_space = OutOfSpace(c),
                                    .error = why[c.shard].has_value()
                                                 ? std::string(why[c.shard]->message())
                                                 : c.status.error_message(),
                                    .since = absl::Now()};
            started = episode_;
          }
        }
        if (started.has_value() && options_.on_retry) options_.on_retry(*started);
      }
      if (!SleepUnlessCancelled(sleep)) continue;  // returns CANCELLED above
      backoff = std::min(backoff * 2, options_.max_backoff);
      retries_.fetch_add(retry.size(), std::memory_order_relaxed);
      pending = std::move(retry);
      continue;
    }
    Call* c = failed != nullptr ? failed : retry.front();
    std::string attempts;
    if (c->attempts > 1) {
      attempts = absl::StrFormat(" (after %d attempts over %.1f s)", c->attempts,
                                 absl::ToDoubleSeconds(absl::Now() - start));
    } else if (failed == nullptr) {
      // One attempt that outlasted the retry window (a silent PS: a
      // partition): say that the window, not the attempt, ran out.
      attempts = absl::StrFormat(" (no reply within the %.1f s retry window)",
                                 absl::ToDoubleSeconds(absl::Now() - start));
    }
    if (OutOfSpace(*c)) {
      return absl::Status(brook::rpc::FromGrpcCode(c->status.error_code()),
                          absl::StrCat("PS shard ", c->shard, " (", shards_[c->shard]->address,
                                       "): out of space: ", c->status.error_message(), attempts));
    }
    absl::Status s = Retryable(c->status.error_code()) && why[c->shard].has_value() ? *why[c->shard]
                                                                                    : Explain(*c);
    absl::Status out(s.code(), absl::StrCat(s.message(), attempts));
    return IsWrongEndpoint(s) ? MarkWrongEndpoint(out) : out;
  }
}

void GrpcPsClient::AwaitRound(const std::vector<Call*>& pending, absl::Duration silent_notice) {
  // Shared with the callbacks: the last one may still be unlocking it when
  // this thread returns.
  struct Round {
    absl::Mutex mu;
    int left ABSL_GUARDED_BY(mu) = 0;
  };
  auto round = std::make_shared<Round>();
  {
    absl::MutexLock lock(&round->mu);
    round->left = static_cast<int>(pending.size());
  }
  for (Call* c : pending) {
    c->replied = false;
    c->issue(shards_[c->shard]->Pick(), c->context.get(), [c, round](grpc::Status s) {
      c->status = std::move(s);
      absl::MutexLock lock(&round->mu);
      c->replied = true;
      --round->left;
    });
  }
  const absl::Time round_start = absl::Now();
  bool silent = false;
  // Every RPC has a deadline, so every callback runs; a Cancel() cancels
  // them so they run now.
  bool cancelled_round = false;
  auto all_done = [](int* left) { return *left == 0; };
  round->mu.Lock();
  while (!round->mu.AwaitWithTimeout(absl::Condition(+all_done, &round->left),
                                     absl::Milliseconds(50))) {
    if (cancelled() && !cancelled_round) {
      cancelled_round = true;
      round->mu.Unlock();  // TryCancel may run a callback on this thread
      for (Call* c : pending) c->context->TryCancel();
      round->mu.Lock();
    }
    if (!silent && silent_notice > absl::ZeroDuration() &&
        absl::Now() - round_start >= silent_notice) {
      silent = true;
      const Call* waiting = pending.front();
      for (const Call* c : pending) {
        if (!c->replied) {
          waiting = c;
          break;
        }
      }
      RetryEpisode episode{
          .shard = waiting->shard,
          .address = shards_[waiting->shard]->address,
          .silent = true,
          .error = absl::StrFormat(
              "PS shard %d (%s): no reply for %.0f s (partitioned from it, or it is overloaded)",
              waiting->shard, shards_[waiting->shard]->address,
              absl::ToDoubleSeconds(silent_notice)),
          .since = round_start};
      round->mu.Unlock();
      {
        absl::MutexLock lock(&episode_mu_);
        if (retrying_calls_++ == 0) episode_ = std::move(episode);
      }
      round->mu.Lock();
    }
  }
  round->mu.Unlock();
  if (silent) {
    absl::MutexLock lock(&episode_mu_);
    if (--retrying_calls_ == 0) episode_.reset();
  }
}

bool GrpcPsClient::SleepUnlessCancelled(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (!cancelled()) {
    const absl::Duration left = end - absl::Now();
    if (left <= absl::ZeroDuration()) return true;
    absl::SleepFor(std::min(left, absl::Milliseconds(50)));
  }
  return false;
}

absl::Status GrpcPsClient::Explain(const Call& c) {
  const Shard& shard = *shards_[c.shard];
  const brook::rpc::Peer peer{.address = shard.address,
                              .expected = v1::NODE_KIND_PS,
                              .tls = options_.tls,
                              .channel = shard.stubs.front()->channel()};
  const absl::Status s = brook::rpc::FromGrpcError(c.status, "the PS call", peer, c.wait_for_ready);
  // The explanation starts with the address: name the shard before it.
  absl::string_view rest = s.message();
  std::string message = absl::ConsumePrefix(&rest, shard.address)
                            ? absl::StrCat("PS shard ", c.shard, " (", shard.address, ")", rest)
                            : absl::StrCat("PS shard ", c.shard, " (", shard.address, "): ", rest);
  if (absl::IsUnauthenticated(s)) {
    // Say what this client sent and where the right token goes.
    if (!options_.token.withheld.empty()) {
      absl::StrAppend(&message, " (this client sent no PS token: ", options_.token.withheld, ")");
    } else if (options_.token.token.empty()) {
      absl::StrAppend(&message, " (this client sent no PS token)");
    } else {
      absl::StrAppend(&message, " (this client sent the PS token from ", options_.token.source,
                      "; give the PS's token with --ps-token-file FILE or $BROOK_PS_TOKEN)");
    }
  }
  absl::Status out(s.code(), message);
  return IsWrongEndpoint(s) ? MarkWrongEndpoint(out) : out;
}

absl::Status GrpcPsClient::CheckShards(absl::Duration timeout, bool shard_order) {
  for (size_t i = 0; i < shards_.size(); ++i) {
    const Shard& shard = *shards_[i];
    const brook::rpc::Peer peer{.address = shard.address,
                                .expected = v1::NODE_KIND_PS,
                                .tls = options_.tls,
                                .channel = shard.stubs.front()->channel(),
                                .probe_timeout = timeout};
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    v1::DescribeResponse node;
    const grpc::Status s = v1::Node::NewStub(peer.channel)->Describe(&context, {}, &node);
    const std::string name = absl::StrCat("PS shard ", i, " (", shard.address, ")");
    // The route check would refuse every request sent there (a tool that
    // turns it off addresses PS nodes outside their cluster).
    if (s.ok() && shard_order && options_.check_route && node.kind() == v1::NODE_KIND_PS &&
        node.num_shards() > 0 &&
        (node.shard_index() != static_cast<int32_t>(i) || node.num_shards() != num_shards())) {
      return MarkWrongEndpoint(absl::FailedPreconditionError(absl::StrCat(
          name, " is PS shard ", node.shard_index(), " of ", node.num_shards(), ", not shard ", i,
          " of ", num_shards(), ": list the PS addresses in shard order, all of them")));
    }
    if (s.ok() && node.kind() == v1::NODE_KIND_PS) continue;
    // Not a PS, or no answer: ask what is there.
    const absl::Status why = brook::rpc::DiagnoseEndpoint(peer);
    if (!IsWrongEndpoint(why)) continue;  // unreachable, or starting: the calls will tell
    absl::string_view rest = why.message();
    absl::ConsumePrefix(&rest, shard.address);
    return MarkWrongEndpoint(absl::Status(why.code(), absl::StrCat(name, rest)));
  }
  return absl::OkStatus();
}

void GrpcPsClient::SetAdminRetryWindow(absl::Duration window) {
  admin_retry_window_ns_.store(absl::ToInt64Nanoseconds(window), std::memory_order_relaxed);
}

void GrpcPsClient::SetRetryWindow(absl::Duration window) {
  retry_window_ns_.store(absl::ToInt64Nanoseconds(window), std::memory_order_relaxed);
}

absl::Duration GrpcPsClient::retry_window() const {
  return absl::Nanoseconds(retry_window_ns_.load(std::memory_order_relaxed));
}

void GrpcPsClient::Cancel() { cancelled_.store(true); }

std::optional<GrpcPsClient::RetryEpisode> GrpcPsClient::retrying() const {
  absl::MutexLock lock(&episode_mu_);
  return episode_;
}

absl::Status GrpcPsClient::WaitForReady(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  // Waiting for a connection hides why there is none: an address that is no
  // PS fails now, not after the first attempt's timeout. (Shards out of
  // order: the route check refuses the first call.)
  RETURN_IF_ERROR(CheckShards(std::min(timeout, absl::Seconds(2)), /*shard_order=*/false));
  while (true) {
    std::vector<v1::HealthRequest> reqs(shards_.size());
    std::vector<v1::HealthResponse> resps(shards_.size());
    std::vector<Call> calls(shards_.size());
    for (size_t s = 0; s < shards_.size(); ++s) {
      calls[s].shard = static_cast<int32_t>(s);
      calls[s].wait_for_ready = true;
      calls[s].issue = [req = &reqs[s], resp = &resps[s]](Stub* stub, grpc::ClientContext* ctx,
                                                          Done done) {
        stub->async()->Health(ctx, req, resp, std::move(done));
      };
    }
    RETURN_IF_ERROR(Run(calls, deadline));
    int32_t not_serving = -1;
    for (size_t s = 0; s < shards_.size() && not_serving < 0; ++s) {
      if (!resps[s].serving()) not_serving = static_cast<int32_t>(s);
    }
    if (not_serving < 0) return absl::OkStatus();
    if (absl::Now() + absl::Milliseconds(50) >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "PS shard ", not_serving, " (", shards_[not_serving]->address, ") is not serving"));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

absl::Status GrpcPsClient::CreateTable(const TableOptions& options) {
  v1::CreateTableRequest req;
  ToProto(options, req.mutable_table());
  std::vector<v1::CreateTableResponse> resps(shards_.size());
  std::vector<Call> calls(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) {
    calls[s].shard = static_cast<int32_t>(s);
    calls[s].issue = [&req, resp = &resps[s]](Stub* stub, grpc::ClientContext* ctx, Done done) {
      stub->async()->CreateTable(ctx, &req, resp, std::move(done));
    };
  }
  RETURN_IF_ERROR(Run(calls, CallDeadline()));
  RememberWire(options);
  return absl::OkStatus();
}

absl::Status GrpcPsClient::DropOnEveryShard(const v1::DropTableRequest& req,
                                            std::vector<v1::DropTableResponse>* resps,
                                            std::vector<Call>* calls, uint32_t ok_codes) {
  resps->clear();
  resps->resize(shards_.size());
  calls->clear();
  calls->resize(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) {
    (*calls)[s].shard = static_cast<int32_t>(s);
    (*calls)[s].issue = [&req, resp = &(*resps)[s]](Stub* stub, grpc::ClientContext* ctx,
                                                    Done done) {
      stub->async()->DropTable(ctx, &req, resp, std::move(done));
    };
  }
  return Run(*calls, CallDeadline(), ok_codes);
}

absl::Status GrpcPsClient::DropTable(std::string_view table) {
  v1::DropTableRequest req;
  req.set_table(std::string(table));
  std::vector<v1::DropTableResponse> resps;
  std::vector<Call> calls;
  // A shard without the table (e.g. a retried drop it already applied) is fine.
  RETURN_IF_ERROR(
      DropOnEveryShard(req, &resps, &calls, 1u << static_cast<int>(grpc::StatusCode::NOT_FOUND)));
  for (const Call& c : calls) {
    if (c.status.ok()) return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("no table '", std::string(table), "' on any shard"));
}

absl::StatusOr<DroppedTables> GrpcPsClient::DropTablesWithPrefix(std::string_view prefix) {
  v1::DropTableRequest req;
  req.set_prefix(std::string(prefix));
  std::vector<v1::DropTableResponse> resps;
  std::vector<Call> calls;
  RETURN_IF_ERROR(DropOnEveryShard(req, &resps, &calls, 0));
  DroppedTables sum;
  for (const v1::DropTableResponse& r : resps) {
    sum.tables += r.tables_dropped();
    sum.dense += r.dense_dropped();
  }
  return sum;
}

absl::Status GrpcPsClient::Pull(std::string_view table, absl::Span<const uint64_t> keys,
                                absl::Span<float> out) {
  ASSIGN_OR_RETURN(size_t dim, InferDim(table, keys.size(), out.size(), "pull"));
  if (keys.empty()) return absl::OkStatus();
  const WirePrecision precision = WireOf(table);
  KeyPlan plan(sharding::TableId(table), keys, num_shards());
  const std::vector<Part> parts = SplitParts(plan, KeysPerRequest(dim));
  std::vector<v1::PullRequest> reqs(parts.size());
  std::vector<grpc::ByteBuffer> replies(parts.size());
  std::vector<Call> calls(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) {
    const Part& part = parts[p];
    v1::PullRequest& req = reqs[p];
    req.set_table(std::string(table));
    wire::EncodeKeys(plan.shard_keys(part.shard).subspan(part.begin, part.size()),
                     req.mutable_keys());
    req.set_dim(static_cast<uint32_t>(dim));
    req.set_precision(static_cast<v1::WirePrecision>(wire::WirePrecisionNumber(precision)));
    if (options_.check_route) {
      req.mutable_route()->set_shard_index(part.shard);
      req.mutable_route()->set_num_shards(num_shards());
    }
    calls[p].shard = part.shard;
    calls[p].issue = [req = &req, reply = &replies[p]](Stub* stub, grpc::ClientContext* ctx,
                                                       Done done) {
      stub->PullRaw(ctx, req, reply, std::move(done));
    };
  }
  RETURN_IF_ERROR(Run(calls, CallDeadline()));

  // Each reply row is copied once, out of the reply's slices straight to the
  // first occurrence of its key in `out`; repeated keys are filled from there.
  for (size_t p = 0; p < parts.size(); ++p) {
    const Part& part = parts[p];
    const absl::Span<const uint32_t> first =
        plan.shard_first_inputs(part.shard).subspan(part.begin, part.size());
    absl::Status read =
        wire::ReadPullReply(&replies[p], static_cast<uint32_t>(dim), part.size(), precision,
                            [&](size_t r) { return out.data() + size_t{first[r]} * dim; });
    if (!read.ok()) {
      return absl::InternalError(absl::StrCat("PS shard ", part.shard, " (",
                                              shards_[part.shard]->address, "): ", read.message()));
    }
  }
  plan.CopyDuplicateRows(dim, out);
  CountPull(plan.num_unique(), plan.num_unique() * dim, precision);
  return absl::OkStatus();
}

absl::Status GrpcPsClient::Push(std::string_view table, absl::Span<const uint64_t> keys,
                                absl::Span<const float> grads, int64_t step) {
  ASSIGN_OR_RETURN(size_t dim, InferDim(table, keys.size(), grads.size(), "push"));
  if (keys.empty()) return absl::OkStatus();
  const WirePrecision precision = WireOf(table);
  const bool fp32 = precision == WirePrecision::kFp32;
  KeyPlan plan(sharding::TableId(table), keys, num_shards());
  const std::vector<Part> parts = SplitParts(plan, KeysPerRequest(dim));
  std::vector<v1::PushRequest> reqs(parts.size());
  std::vector<v1::PushResponse> resps(parts.size());

  // Sum duplicate keys' gradients straight into the request payloads when a
  // shard has one fp32 RPC; a shard split into several, or in bf16 / fp16,
  // sums into a buffer first.
  std::vector<std::vector<float>> split_sums(num_shards());
  std::vector<absl::Span<float>> sums(num_shards());
  for (size_t p = 0; p < parts.size(); ++p) {
    const Part& part = parts[p];
    const size_t shard_keys = plan.shard_keys(part.shard).size();
    if (fp32 && part.size() == shard_keys) {
      sums[part.shard] = wire::MutableFloats(reqs[p].mutable_grads(), shard_keys * dim);
    } else if (part.begin == 0) {
      split_sums[part.shard].resize(shard_keys * dim);
      sums[part.shard] = absl::MakeSpan(split_sums[part.shard]);
    }
  }
  plan.SumGradients(grads, dim, sums);

  std::vector<Call> calls(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) {
    const Part& part = parts[p];
    v1::PushRequest& req = reqs[p];
    req.set_table(std::string(table));
    wire::EncodeKeys(plan.shard_keys(part.shard).subspan(part.begin, part.size()),
                     req.mutable_keys());
    if (!fp32 || part.size() != plan.shard_keys(part.shard).size()) {
      req.set_precision(static_cast<v1::WirePrecision>(wire::WirePrecisionNumber(precision)));
      const float scale = wire::EncodeFloatsAs(
          precision, sums[part.shard].subspan(part.begin * dim, part.size() * dim),
          req.mutable_grads());
      if (precision == WirePrecision::kFp16) req.set_grad_scale(scale);
    }
    req.set_client_id(client_id());
    // Fixed before the first attempt: every retry of this RPC carries it.
    req.set_sequence(NextSequence());
    req.set_step(step);
    req.set_learning_rate_scale(1.0f);
    if (options_.check_route) {
      req.mutable_route()->set_shard_index(part.shard);
      req.mutable_route()->set_num_shards(num_shards());
    }
    calls[p].shard = part.shard;
    calls[p].issue = [req = &req, resp = &resps[p]](Stub* stub, grpc::ClientContext* ctx,
                                                    Done done) {
      stub->async()->Push(ctx, req, resp, std::move(done));
    };
  }
  RETURN_IF_ERROR(Run(calls, CallDeadline()));
  CountPush(plan.num_unique(), plan.num_unique() * dim, precision);
  return absl::OkStatus();
}

absl::Status GrpcPsClient::CreateDense(absl::Span<const DenseOptions> variables) {
  ASSIGN_OR_RETURN(std::vector<int32_t> placement, dense_.Place(variables, num_shards()));
  std::vector<v1::CreateDenseRequest> reqs(variables.size());
  std::vector<v1::CreateDenseResponse> resps(variables.size());
  std::vector<Call> calls(variables.size());
  for (size_t i = 0; i < variables.size(); ++i) {
    ToProto(variables[i], reqs[i].mutable_dense());
    calls[i].shard = placement[i];
    calls[i].issue = [req = &reqs[i], resp = &resps[i]](Stub* stub, grpc::ClientContext* ctx,
                                                        Done done) {
      stub->async()->CreateDense(ctx, req, resp, std::move(done));
    };
  }
  return Run(calls, CallDeadline());
}

absl::Status GrpcPsClient::LocateDense(absl::Span<const DenseOptions> variables) {
  return dense_.Place(variables, num_shards()).status();
}

absl::Status GrpcPsClient::PullDense(std::string_view name, absl::Span<float> out) {
  ASSIGN_OR_RETURN(DenseDirectory::Entry e, dense_.Find(name));
  if (out.size() != e.num_floats) {
    return absl::InvalidArgumentError(absl::StrCat("dense pull of '", std::string(name), "' into ",
                                                   out.size(), " floats; the variable has ",
                                                   e.num_floats));
  }
  v1::PullDenseRequest req;
  req.set_name(std::string(name));
  req.set_num_floats(e.num_floats);
  if (options_.check_route) {
    req.mutable_route()->set_shard_index(e.shard);
    req.mutable_route()->set_num_shards(num_shards());
  }
  v1::PullDenseResponse resp;
  std::vector<Call> calls(1);
  calls[0].shard = e.shard;
  calls[0].issue = [&req, &resp](Stub* stub, grpc::ClientContext* ctx, Done done) {
    stub->async()->PullDense(ctx, &req, &resp, std::move(done));
  };
  RETURN_IF_ERROR(Run(calls, CallDeadline()));
  std::vector<float> scratch;
  ASSIGN_OR_RETURN(absl::Span<const float> values,
                   wire::DecodeFloats(resp.values(), &scratch, "dense values"));
  if (values.size() != out.size()) {
    return absl::InternalError(absl::StrCat("PS shard ", e.shard, " replied ", values.size(),
                                            " floats for dense '", std::string(name), "' of ",
                                            out.size()));
  }
  std::copy(values.begin(), values.end(), out.begin());
  return absl::OkStatus();
}

absl::Status GrpcPsClient::PushDense(std::string_view name, absl::Span<const float> grads,
                                     int64_t step) {
  ASSIGN_OR_RETURN(DenseDirectory::Entry e, dense_.Find(name));
  if (grads.size() != e.num_floats) {
    return absl::InvalidArgumentError(absl::StrCat("dense push to '", std::string(name), "' of ",
                                                   grads.size(), " floats; the variable has ",
                                                   e.num_floats));
  }
  v1::PushDenseRequest req;
  req.set_name(std::string(name));
  wire::EncodeFloats(grads, req.mutable_grads());
  req.set_client_id(client_id());
  req.set_sequence(NextSequence());
  req.set_step(step);
  req.set_learning_rate_scale(1.0f);
  if (options_.check_route) {
    req.mutable_route()->set_shard_index(e.shard);
    req.mutable_route()->set_num_shards(num_shards());
  }
  v1::PushDenseResponse resp;
  std::vector<Call> calls(1);
  calls[0].shard = e.shard;
  calls[0].issue = [&req, &resp](Stub* stub, grpc::ClientContext* ctx, Done done) {
    stub->async()->PushDense(ctx, &req, &resp, std::move(done));
  };
  return Run(calls, CallDeadline());
}

absl::StatusOr<std::vector<ServerStats>> GrpcPsClient::Stats() {
  v1::StatsRequest req;
  std::vector<v1::StatsResponse> resps(shards_.size());
  std::vector<Call> calls(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) {
    calls[s].shard = static_cast<int32_t>(s);
    calls[s].issue = [&req, resp = &resps[s]](Stub* stub, grpc::ClientContext* ctx, Done done) {
      stub->async()->Stats(ctx, &req, resp, std::move(done));
    };
  }
  RETURN_IF_ERROR(Run(calls, CallDeadline()));
  std::vector<ServerStats> out;
  out.reserve(resps.size());
  for (const v1::StatsResponse& r : resps) out.push_back(wire::FromProto(r));
  return out;
}

absl::StatusOr<std::vector<CheckpointInfo>> GrpcPsClient::Checkpoint(
    const CheckpointOptions& options) {
  v1::CheckpointRequest req;
  req.set_dir(options.dir);
  req.set_table_prefix(options.table_prefix);
  req.set_incremental(options.incremental);
  req.set_step(options.step);
  req.set_shard_map_version(options.shard_map_version);
  for (const std::string& a : options.shard_addresses) req.add_shard_addresses(a);
  if (req.shard_addresses().empty()) {
    for (const std::string& a : options_.addresses) req.add_shard_addresses(a);
  }
  std::vector<v1::CheckpointResponse> resps(shards_.size());
  std::vector<Call> calls(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) {
    calls[s].shard = static_cast<int32_t>(s);
    calls[s].issue = [&req, resp = &resps[s]](Stub* stub, grpc::ClientContext* ctx, Done done) {
      stub->async()->Checkpoint(ctx, &req, resp, std::move(done));
    };
  }
  // One attempt may take the whole budget: a checkpoint or restore that is
  // cut short and retried would only start over.
  RETURN_IF_ERROR(
      Run(calls, absl::Now() + options_.admin_deadline, 0, options_.admin_deadline,
          absl::Now() + absl::Nanoseconds(admin_retry_window_ns_.load(std::memory_order_relaxed))));
  std::vector<CheckpointInfo> out;
  for (const v1::CheckpointResponse& r : resps) out.push_back(FromProto(r.checkpoint()));
  return out;
}

absl::Status GrpcPsClient::RestoreOnEveryShard(const v1::RestoreRequest& req,
                                               std::vector<v1::RestoreResponse>* resps) {
  resps->clear();
  resps->resize(shards_.size());
  std::vector<Call> calls(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) {
    calls[s].shard = static_cast<int32_t>(s);
    calls[s].issue = [&req, resp = &(*resps)[s]](Stub* stub, grpc::ClientContext* ctx, Done done) {
      stub->async()->Restore(ctx, &req, resp, std::move(done));
    };
  }
  // One attempt may take the whole budget: a restore that is cut short and
  // retried would only start over. An import checks everything before it
  // changes anything, and one retried after a lost answer imports the same
  // rows again (idempotent).
  return Run(
      calls, absl::Now() + options_.admin_deadline, 0, options_.admin_deadline,
      absl::Now() + absl::Nanoseconds(admin_retry_window_ns_.load(std::memory_order_relaxed)));
}

absl::StatusOr<std::vector<RestoreInfo>> GrpcPsClient::Restore(const std::string& dir) {
  v1::RestoreRequest req;
  req.set_dir(dir);
  std::vector<v1::RestoreResponse> resps;
  RETURN_IF_ERROR(RestoreOnEveryShard(req, &resps));
  std::vector<RestoreInfo> out;
  for (const v1::RestoreResponse& r : resps) {
    RestoreInfo info;
    info.rows = r.rows();
    info.dense = r.dense();
    info.seconds = r.seconds();
    out.push_back(info);
  }
  return out;
}

absl::StatusOr<std::vector<ImportInfo>> GrpcPsClient::ImportTables(const ImportOptions& options) {
  v1::RestoreRequest req;
  req.set_dir(options.dir);
  req.mutable_import()->mutable_names()->Add(options.names.begin(), options.names.end());
  req.mutable_import()->set_to_prefix(options.to_prefix);
  std::vector<v1::RestoreResponse> resps;
  RETURN_IF_ERROR(RestoreOnEveryShard(req, &resps));
  std::vector<ImportInfo> out;
  for (const v1::RestoreResponse& r : resps) {
    ImportInfo info;
    info.from_prefix = r.from_prefix();
    info.seconds = r.seconds();
    for (const v1::ImportedPart& p : r.imported()) {
      info.parts.push_back(
          {.name = p.name(), .dense = p.dense(), .rows = p.rows(), .slots = p.slots()});
    }
    out.push_back(std::move(info));
  }
  return out;
}

absl::StatusOr<std::vector<StartupInfo>> GrpcPsClient::FenceClients(
    absl::Span<const uint64_t> client_ids) {
  v1::FenceClientsRequest req;
  req.mutable_client_ids()->Add(client_ids.begin(), client_ids.end());
  std::vector<v1::FenceClientsResponse> resps(shards_.size());
  std::vector<Call> calls(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) {
    calls[s].shard = static_cast<int32_t>(s);
    calls[s].issue = [&req, resp = &resps[s]](Stub* stub, grpc::ClientContext* ctx, Done done) {
      stub->async()->FenceClients(ctx, &req, resp, std::move(done));
    };
  }
  // Short: the chief sends the list again every few seconds, and must not
  // wait long on a PS that is down when it shuts down.
  RETURN_IF_ERROR(Run(calls, absl::Now() + std::min(retry_window(), absl::Seconds(5))));
  std::vector<StartupInfo> out;
  out.reserve(resps.size());
  for (const v1::FenceClientsResponse& r : resps) out.push_back(wire::FromProto(r.startup()));
  return out;
}

}  // namespace brook::ps
