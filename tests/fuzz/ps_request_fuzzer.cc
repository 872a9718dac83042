// Fuzzes the PS request decoding: bytes as brook.v1 request messages, run
// through the production handlers (ps/rpc/ps_handlers.h, what PsService
// calls) against a fresh in-process ParameterServer, no network. The only
// assertions: nothing crashes, hangs or allocates without bound, and every
// failure comes back as a status (never an OK reply that does not
// serialize, never an error that leaves a half-filled reply).
//
// Input: a sequence of requests, each
//   1 byte   method (byte % kMethods, the order of the switch below)
//   2 bytes  little-endian length L
//   L bytes  the serialized request (cut short at the end of the input)
// so one input can create a table, push to it and pull it back.
// make_seeds_ps_request.py writes valid sequences.
//
// BROOK_FUZZ_VERBOSE=1 prints each request's method and status (to check
// that the seeds do what they say: ./ps_request_fuzzer SEED_FILE).
//
// Checkpoint and Restore are left out: their requests name directories on
// the server's disk (checkpoint_manifest_fuzzer covers reading them back).
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "brook/v1/ps.pb.h"
#include "ps/parameter_server.h"
#include "ps/rpc/ps_handlers.h"

namespace {

namespace v1 = brook::v1;
using brook::ps::rpc::PsHandlers;

// A pull reply far smaller than production's 64 MiB keeps each run fast; the
// limit check is the same code either way.
constexpr uint64_t kMaxReplyBytes = 4u << 20;
constexpr int kMaxRequests = 64;
// A dense variable may legitimately hold up to ps::kMaxDenseFloats (1 GiB,
// plus optimizer slots): a real allocation a fuzzer must not make. Larger
// ones are skipped here, not refused by the PS.
constexpr uint64_t kMaxFuzzDenseFloats = 1u << 22;

bool verbose = false;

enum Method : uint8_t {
  kCreateTable,
  kDropTable,
  kPull,
  kPullRaw,
  kPush,
  kCreateDense,
  kPullDense,
  kPushDense,
  kPullBatch,
  kPushBatch,
  kStats,
  kHealth,
  kMethods,
};

// Parses `bytes` as Req, runs the handler, checks the outcome.
template <typename Req, typename Resp>
void Run(PsHandlers* handlers, absl::Status (PsHandlers::*handler)(const Req&, Resp*),
         const std::string& bytes) {
  Req req;
  if (!req.ParseFromString(bytes)) return;  // gRPC would refuse it before the handler
  Resp resp;
  absl::Status st = (handlers->*handler)(req, &resp);
  if (verbose) {
    std::fprintf(stderr, "%s: %s\n", req.GetTypeName().c_str(), st.ToString().c_str());
  }
  std::string out;
  if (!resp.SerializeToString(&out)) __builtin_trap();
  // A failed handler leaves nothing a client could mistake for data.
  if (!st.ok() && !out.empty()) __builtin_trap();
}

bool DenseTooLarge(const v1::DenseConfig& c) {
  uint64_t n = 1;
  for (int64_t d : c.shape()) {
    if (d <= 0) return false;  // the PS refuses it
    if (static_cast<uint64_t>(d) > kMaxFuzzDenseFloats) return true;
    n *= static_cast<uint64_t>(d);
    if (n > kMaxFuzzDenseFloats) return true;
  }
  return false;
}

void RunPullRaw(PsHandlers* handlers, const std::string& bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer reply;
  absl::Status st = handlers->PullRaw(request, &reply);
  if (verbose) std::fprintf(stderr, "PullRaw: %s\n", st.ToString().c_str());
  if (!st.ok()) return;
  // An OK raw reply must be a PullResponse whose rows are keys x dim.
  v1::PullResponse resp;
  grpc::ProtoBufferReader reader(&reply);
  if (!resp.ParseFromZeroCopyStream(&reader)) __builtin_trap();
  // 4 bytes a value in fp32, 2 in bf16 / fp16 (the request's precision).
  const uint64_t value_bytes = resp.precision() == v1::WIRE_PRECISION_FP32 ? 4 : 2;
  if (resp.dim() != 0 && resp.rows().size() % (value_bytes * uint64_t{resp.dim()}) != 0) {
    __builtin_trap();
  }
}

void RunOne(PsHandlers* handlers, uint8_t method, const std::string& bytes) {
  switch (method % kMethods) {
    case kCreateTable:
      return Run(handlers, &PsHandlers::CreateTable, bytes);
    case kDropTable:
      return Run(handlers, &PsHandlers::DropTable, bytes);
    case kPull:
      return Run(handlers, &PsHandlers::Pull, bytes);
    case kPullRaw:
      return RunPullRaw(handlers, bytes);
    case kPush:
      return Run(handlers, &PsHandlers::Push, bytes);
    case kCreateDense: {
      v1::CreateDenseRequest req;
      if (req.ParseFromString(bytes) && DenseTooLarge(req.dense())) return;
      return Run(handlers, &PsHandlers::CreateDense, bytes);
    }
    case kPullDense:
      return Run(handlers, &PsHandlers::PullDense, bytes);
    case kPushDense:
      return Run(handlers, &PsHandlers::PushDense, bytes);
    case kPullBatch:
      return Run(handlers, &PsHandlers::PullBatch, bytes);
    case kPushBatch:
      return Run(handlers, &PsHandlers::PushBatch, bytes);
    case kStats:
      return Run(handlers, &PsHandlers::Stats, bytes);
    case kHealth:
      return Run(handlers, &PsHandlers::Health, bytes);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  grpc_init();  // grpc::Slice and ByteBuffer need the core library up
  // protobuf logs every invalid-UTF-8 string it meets: a fuzzer's every input.
  google::protobuf::SetLogHandler(nullptr);
  verbose = std::getenv("BROOK_FUZZ_VERBOSE") != nullptr;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  brook::ps::ParameterServer ps(brook::ps::ParameterServerOptions{});
  PsHandlers handlers(&ps, kMaxReplyBytes);
  size_t pos = 0;
  for (int i = 0; i < kMaxRequests && size - pos >= 3; ++i) {
    const uint8_t method = data[pos];
    const size_t len = data[pos + 1] | (size_t{data[pos + 2]} << 8);
    pos += 3;
    const size_t take = std::min(len, size - pos);
    const std::string bytes(reinterpret_cast<const char*>(data) + pos, take);
    pos += take;
    RunOne(&handlers, method, bytes);
  }
  return 0;
}
