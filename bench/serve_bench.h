// `brook bench serve`: `brook serve` under closed-loop load, each figure
// beside its ceiling measured in the same run.
//
// The server is a serving::ModelServer in this process on 127.0.0.1:0 (HTTP
// and gRPC; the clients' traffic goes over real loopback sockets), or a
// running `brook serve` (--target / --grpc-target). Clients are threads
// that each send a request and wait for its reply: TF Serving's REST API
// over keep-alive HTTP/1.1 connections (bench/http_client.h; the JSON
// bodies are built beforehand, serving::PredictJsonFromExamples) and
// brook.v1.Predict over gRPC (a channel per client). Requests carry the
// records of --data in turn.
//
// Figures: requests/s and p50/p99 latency at each concurrency with one
// example a request; examples/s with `batch` examples a request from
// `batch_clients` clients; failed requests (any non-200 / non-OK reply) in
// every phase. Ceiling: `brook predict`'s offline examples/s on the same
// records (chief::ScoreModel over the export restored in process, the
// restore untimed, backend and parse threads = the server's workers),
// measured in slices alternating with the batched phases' (the ratio is the
// median slice pair's, as in `brook bench ps`). Equality: the served scores of the records vs
// chief::ScoreExport's, max |difference| over HTTP and over gRPC. Swaps:
// while `swap_clients` clients load the server, `swaps` new versions (copies
// of the export renamed into the directory it watches) are placed one
// after another, each waited for until a reply carries its version
// (X-Brook-Model-Version, PredictResponse.version); failed requests and p99
// during the swaps are reported beside the same load without swaps.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "absl/status/status.h"

namespace brook::bench {

struct ServeBenchOptions {
  std::string model;              // an export directory (required)
  std::vector<std::string> data;  // TFRecord files; empty: the export's eval files
  int64_t max_examples = 20000;   // records read from `data` (requests cycle them)
  // A running `brook serve` instead of one in this process: its HTTP
  // address, and its gRPC one ("": the gRPC phases are skipped). The
  // ceiling and the equality still score `model`, which must be what it
  // serves.
  std::string target;
  std::string grpc_target;
  // With target: the directory the running server watches (its --model),
  // where the swaps place versions; "": no swaps against a target.
  std::string swap_dir;
  std::string model_name = "brook";
  // The server in this process (brook serve's flags of the same names);
  // also the offline ceiling's threads.
  int workers = 2;
  int http_threads = 2;
  int max_batch = 64;
  int64_t batch_timeout_micros = 2000;
  bool fill_missing = false;
  double seconds = 4;  // per phase
  // The batched phases and the offline ceiling alternate in this many
  // slice pairs (bench/paired_rate.h); the ratio is the median pair's.
  int slices = 4;
  std::vector<int> concurrency = {1, 16};  // clients, one example a request
  int batch = 64;                          // examples a request in the batched phases
  int batch_clients = 4;
  int swaps = 10;
  int swap_clients = 4;       // half over HTTP, half over gRPC (all HTTP without gRPC)
  double poll_seconds = 0.2;  // the server's look for new versions
  int offline_batch = 1024;   // brook predict's batch
  std::string work_dir;       // the swap versions' copies; "" = temp dir
};

// Runs every phase, printing the table to `out`; *result gets every figure:
// "phases" (by name: http_c1, grpc_c16, http_batch64, mix_steady,
// mix_swaps, ...: requests, failed, requests_per_second,
// examples_per_second, p50_ms, p99_ms, max_ms, cores_busy), "offline",
// "ratios" (median slice pair, _low, _high), "equality", "swaps",
// "server_steps_us_per_example", "goals" (value, goal, pass each),
// "failed_requests", plus the machine and server. OK even when a goal is missed;
// INVALID_ARGUMENT for bad options, the error of a server or export that
// cannot be used. Failed requests and scores that differ are reported in
// *result ("failed_requests", "equality.pass"): the caller decides.
absl::Status RunServeBench(const ServeBenchOptions& options, std::ostream& out,
                           nlohmann::json* result);

}  // namespace brook::bench
