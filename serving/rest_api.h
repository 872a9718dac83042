// TensorFlow Serving's REST API over a ModelRepository and a Batcher,
// transport-free: the HTTP server (http_server.h) hands each request's
// method, target and body here and writes back what comes out.
//
//   POST /v1/models/NAME[/versions/N]:predict   {"instances": ...} or
//        {"inputs": ...} (json_examples.h) -> {"predictions": [p, ...]} or
//        {"outputs": [...]}; header X-Brook-Model-Version names the version
//   GET  /v1/models/NAME[/versions/N]           {"model_version_status": [...]}
//   GET  /v1/models/NAME[/versions/N]/metadata  {"model_spec", "metadata":
//        {"signature_def": ...}} with the feature spec as the inputs, plus
//        "brook": the export's job, step, spec hash and recorded eval
//
// Errors are TF Serving's shape, {"error": "..."}: 400 for a bad body or
// example (naming the instance and feature), 404 for another model name, a
// version not served or an unknown path, 405 for a wrong method, 429 when
// the queue is full, 503 while shutting down. N in /versions/N must be the
// version serving now (only one is loaded at a time).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "serving/batcher.h"
#include "serving/model_repository.h"

namespace brook::serving {

struct RestReply {
  int status = 200;
  std::string body;     // JSON
  int64_t version = 0;  // the version that answered a predict (0: none)
};

// The HTTP status TF Serving gives `code`'s errors.
int HttpStatusFor(absl::StatusCode code);
// {"error": message} as TF Serving writes it.
std::string ErrorBody(absl::string_view message);

class RestApi {
 public:
  RestApi(std::string model_name, const ModelRepository* repo, Batcher* batcher)
      : model_name_(std::move(model_name)), repo_(repo), batcher_(batcher) {}

  // Answers one request: `reply` is called exactly once, on this thread or
  // (a predict) on a batcher worker.
  void Handle(std::string_view method, std::string_view target, std::string body,
              std::function<void(RestReply)> reply) const;

  const std::string& model_name() const { return model_name_; }

 private:
  RestReply Status(int64_t version) const;
  RestReply Metadata(int64_t version) const;
  void Predict(int64_t version, std::string body, std::function<void(RestReply)> reply) const;

  const std::string model_name_;
  const ModelRepository* const repo_;
  Batcher* const batcher_;
};

}  // namespace brook::serving
