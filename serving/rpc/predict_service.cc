#include "serving/rpc/predict_service.h"

#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/status_mapping.h"
#include "serving/json_examples.h"

namespace brook::serving {

grpc::Status PredictService::Predict(grpc::ServerContext* context,
                                     const v1::PredictRequest* request,
                                     v1::PredictResponse* response) {
  const absl::Time start = absl::Now();
  in_flight_.fetch_add(1);
  const absl::Status s = stopping_.load() ? absl::UnavailableError("the server is shutting down")
                                          : DoPredict(*request, response);
  in_flight_.fetch_sub(1);
  // Messages quote at most 100 bytes of what the client sent; the whole is
  // bounded too (a grpc-message header past the client's limit reaches it
  // as no status at all).
  const grpc::Status g = rpc::ToGrpcStatus(
      s.ok() || s.message().size() <= 2000
          ? s
          : absl::Status(
                s.code(),
                CutForError(std::string_view(s.message().data(), s.message().size()), 2000)));
  if (metrics_ != nullptr) {
    metrics_->Record(0, static_cast<int>(g.error_code()),
                     absl::ToDoubleSeconds(absl::Now() - start));
  }
  return g;
}

bool PredictService::WaitIdle(absl::Duration timeout) const {
  const absl::Time give_up = absl::Now() + timeout;
  while (in_flight_.load() > 0) {
    if (absl::Now() >= give_up) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

absl::Status PredictService::DoPredict(const v1::PredictRequest& request,
                                       v1::PredictResponse* response) {
  if (!request.model_name().empty() && request.model_name() != model_name_) {
    return absl::NotFoundError(absl::StrCat("no model \"", CutForError(request.model_name()),
                                            "\" here; this server serves \"", model_name_, "\""));
  }
  std::shared_ptr<const Servable> s = repo_->Current();
  if (request.version() != 0 && request.version() != s->version()) {
    return absl::NotFoundError(absl::StrCat("version ", request.version(),
                                            " is not serving; serving version ", s->version()));
  }
  if (request.examples().empty()) return absl::InvalidArgumentError("examples: empty");
  std::vector<std::string> examples(request.examples().begin(), request.examples().end());
  // Checked in the batch: a bad example is INVALID_ARGUMENT "examples[3]: ...".
  std::promise<absl::StatusOr<Prediction>> done;
  std::future<absl::StatusOr<Prediction>> result = done.get_future();
  batcher_->Submit(
      std::move(examples), [&done](absl::StatusOr<Prediction> p) { done.set_value(std::move(p)); },
      "examples");
  absl::StatusOr<Prediction> p = result.get();
  if (!p.ok()) return p.status();
  response->mutable_scores()->Assign(p->scores.begin(), p->scores.end());
  response->set_version(p->version);
  response->set_model_name(model_name_);
  return absl::OkStatus();
}

}  // namespace brook::serving
