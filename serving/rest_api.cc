#include "serving/rest_api.h"

#include <memory>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "serving/json_examples.h"

namespace brook::serving {

namespace {

using Json = nlohmann::json;

// Paths and messages may hold bytes that are not UTF-8: replaced, never a throw.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// A piece of the request (path, name) quoted in an error.
std::string Cut(absl::string_view text) {
  return CutForError(std::string_view(text.data(), text.size()));
}

RestReply Error(int status, absl::string_view message) { return {status, ErrorBody(message), 0}; }

RestReply Error(const absl::Status& s) {
  return {HttpStatusFor(s.code()), ErrorBody(s.message()), 0};
}

std::string_view DtypeOf(input::FeatureType t) {
  switch (t) {
    case input::FeatureType::kFloat:
      return "DT_FLOAT";
    case input::FeatureType::kInt64:
      return "DT_INT64";
    case input::FeatureType::kBytes:
      return "DT_STRING";
  }
  return "DT_INVALID";
}

// A parsed /v1/models/... target.
struct Route {
  std::string model;
  int64_t version = 0;  // 0: the one serving
  std::string verb;     // "" (status), "metadata", "predict", or another ":verb"
};

// NOT_FOUND for a path outside /v1/models/NAME[/versions/N][/metadata|:verb].
absl::StatusOr<Route> ParseTarget(absl::string_view target) {
  target = target.substr(0, target.find('?'));
  constexpr absl::string_view kPrefix = "/v1/models/";
  if (!absl::StartsWith(target, kPrefix)) {
    return absl::NotFoundError(absl::StrCat("no such path: ", Cut(target),
                                            " (the API is /v1/models/NAME[:predict|/metadata])"));
  }
  absl::string_view rest = target.substr(kPrefix.size());
  Route r;
  const size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos) {
    r.verb = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
  }
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  if (parts.empty() || parts[0].empty()) return absl::NotFoundError("no model name in the path");
  r.model = std::string(parts[0]);
  size_t i = 1;
  if (i < parts.size() && parts[i] == "versions") {
    if (i + 1 >= parts.size() || !absl::SimpleAtoi(parts[i + 1], &r.version) || r.version <= 0) {
      return absl::NotFoundError(absl::StrCat("bad version in path ", Cut(target)));
    }
    i += 2;
  }
  if (i < parts.size()) {
    if (i + 1 == parts.size() && parts[i] == "metadata" && r.verb.empty()) {
      r.verb = "metadata";
    } else {
      return absl::NotFoundError(absl::StrCat("no such path: ", Cut(target)));
    }
  }
  return r;
}

}  // namespace

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kDataLoss:
      return 400;  // a malformed example the client sent
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kUnimplemented:
      return 501;
    default:
      return 500;
  }
}

std::string ErrorBody(absl::string_view message) {
  // Messages quote at most 100 bytes of what the client sent; this bounds
  // the whole body as sent (escaping may grow it) in case one does not.
  constexpr size_t kMostBody = 2048;
  const std::string_view text(message.data(), message.size());
  std::string body = Dump(Json{{"error", std::string(text)}});
  for (size_t most = 1500; body.size() > kMostBody && most >= 50; most /= 2) {
    body = Dump(Json{{"error", CutForError(text, most)}});
  }
  return body;
}

void RestApi::Handle(std::string_view method, std::string_view target, std::string body,
                     std::function<void(RestReply)> reply) const {
  absl::StatusOr<Route> route = ParseTarget(absl::string_view(target.data(), target.size()));
  if (!route.ok()) return reply(Error(route.status()));
  if (route->model != model_name_) {
    return reply(
        Error(404, absl::StrCat("Servable not found for request: Latest(", Cut(route->model),
                                "); this server serves \"", model_name_, "\"")));
  }
  const bool post = route->verb == "predict";
  if (!route->verb.empty() && route->verb != "metadata" && !post) {
    return reply(Error(404, absl::StrCat(":", Cut(route->verb),
                                         " is not supported (Brook models answer :predict)")));
  }
  if (method != (post ? "POST" : "GET")) {
    return reply(Error(405, absl::StrCat(std::string(method), " ", std::string(target), ": use ",
                                         post ? "POST" : "GET")));
  }
  if (route->verb.empty()) return reply(Status(route->version));
  if (route->verb == "metadata") return reply(Metadata(route->version));
  Predict(route->version, std::move(body), std::move(reply));
}

RestReply RestApi::Status(int64_t version) const {
  Json list = Json::array();
  for (const VersionStatus& v : repo_->Versions()) {
    if (version != 0 && v.version != version) continue;
    list.push_back({{"version", std::to_string(v.version)},
                    {"state", v.state},
                    {"status",
                     {{"error_code", v.error.empty() ? std::string("OK") : v.error_code},
                      {"error_message", v.error}}}});
  }
  if (list.empty()) {
    return Error(404, absl::StrCat("Servable not found for request: Specific(", model_name_, ", ",
                                   version, ")"));
  }
  return {200, Dump(Json{{"model_version_status", list}}), 0};
}

RestReply RestApi::Metadata(int64_t version) const {
  std::shared_ptr<const Servable> s = repo_->Current();
  if (version != 0 && version != s->version()) {
    return Error(404, absl::StrCat("Servable not found for request: Specific(", model_name_, ", ",
                                   version, "); serving version ", s->version()));
  }
  const input::FeatureSpec& spec = s->features();
  Json inputs = Json::object();
  for (const input::FeatureSpecEntry& f : spec.features) {
    Json dims = Json::array({{{"size", "-1"}, {"name", ""}}});
    dims.push_back(
        {{"size", f.kind == input::FeatureKind::kFixed ? std::to_string(f.length) : "-1"},
         {"name", ""}});
    inputs[f.name] = {{"dtype", DtypeOf(f.type)},
                      {"tensor_shape", {{"dim", dims}, {"unknown_rank", false}}},
                      {"name", f.name},
                      {"brook_kind", f.kind == input::FeatureKind::kFixed ? "fixed" : "varlen"}};
  }
  Json outputs = {
      {"predictions",
       {{"dtype", "DT_FLOAT"},
        {"tensor_shape",
         {{"dim", Json::array({{{"size", "-1"}, {"name", ""}}})}, {"unknown_rank", false}}},
        {"name", "predictions"}}}};
  const chief::ExportManifest& m = s->loaded().manifest;
  Json brook = {
      {"job_id", m.job_id},
      {"step", m.step},
      {"spec_hash", m.spec_hash},
      {"created_unix_micros", m.created_unix_micros},
      {"label", spec.label_name},
      {"missing_features", spec.on_missing == input::MissingPolicy::kError ? "error" : "default"},
      {"dir", s->dir()}};
  if (m.eval.has_value()) {
    brook["eval"] = {
        {"auc", m.eval->auc}, {"logloss", m.eval->logloss}, {"examples", m.eval->examples}};
  }
  Json body = {
      {"model_spec",
       {{"name", model_name_}, {"signature_name", ""}, {"version", std::to_string(s->version())}}},
      {"metadata",
       {{"signature_def",
         {{"signature_def",
           {{"serving_default",
             {{"inputs", inputs},
              {"outputs", outputs},
              {"method_name", "tensorflow/serving/predict"}}}}}}}}},
      {"brook", brook}};
  return {200, Dump(body), 0};
}

void RestApi::Predict(int64_t version, std::string body,
                      std::function<void(RestReply)> reply) const {
  std::shared_ptr<const Servable> s = repo_->Current();
  if (version != 0 && version != s->version()) {
    return reply(Error(404, absl::StrCat("Servable not found for request: Specific(", model_name_,
                                         ", ", version, "); serving version ", s->version())));
  }
  absl::StatusOr<JsonExamples> parsed = ExamplesFromPredictJson(body, s->features());
  if (!parsed.ok()) return reply(Error(parsed.status()));
  if (parsed->examples.empty()) {
    return reply(Error(400, parsed->columnar ? "inputs: no examples" : "instances: empty list"));
  }
  // The examples are checked in their batch (the parse the model step
  // needs anyway): a bad one answers 400 "instances[3]: ...".
  const bool columnar = parsed->columnar;
  batcher_->Submit(
      std::move(parsed->examples),
      [reply = std::move(reply), columnar](absl::StatusOr<Prediction> p) {
        if (!p.ok()) return reply(Error(p.status()));
        Json scores = Json::array();
        for (float x : p->scores) scores.push_back(static_cast<double>(x));
        reply({200, Dump(Json{{columnar ? "outputs" : "predictions", scores}}), p->version});
      },
      columnar ? "inputs" : "instances");
}

}  // namespace brook::serving
