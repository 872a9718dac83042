// TensorFlow Serving's REST API over a real loaded export, through the real
// Beast HTTP server on 127.0.0.1: predict in both forms (scores equal to
// scoring the examples directly), version status, metadata, and each error
// in TF Serving's {"error": ...} shape with its status code.
#include "serving/rest_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serving/http/http_server.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/raw_tcp.h"
#include "tests/testing/serving_export.h"
#include "tests/testing/test_util.h"

namespace brook::serving {
namespace {

using Json = nlohmann::json;

class RestApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    BROOK_ASSERT_OK(testing::TrainAndExport(dir_->Join("data"), dir_->Join("models/3")));
  }
  static void TearDownTestSuite() { delete dir_; }

  void SetUp() override {
    auto repo = ModelRepository::Open({.path = dir_->Join("models")});
    ASSERT_TRUE(repo.ok()) << repo.status();
    repo_ = std::move(*repo);
    batcher_ = std::make_unique<Batcher>(repo_.get(), BatcherOptions{});
    api_ = std::make_unique<RestApi>("ctr", repo_.get(), batcher_.get());
    HttpServerOptions o;
    o.max_body_bytes = 64 << 10;
    o.on_reply = [this](int status, double) { codes_.push_back(status); };
    auto http = HttpServer::Start(
        "127.0.0.1:0", o,
        [this](std::string_view method, std::string_view target, std::string body,
               HttpServer::Reply reply) {
          api_->Handle(method, target, std::move(body), [reply](RestReply r) {
            HttpReply h{r.status, std::move(r.body), {}};
            if (r.version)
              h.headers.emplace_back("X-Brook-Model-Version", std::to_string(r.version));
            reply(std::move(h));
          });
        });
    ASSERT_TRUE(http.ok()) << http.status();
    http_ = std::move(*http);
  }
  void TearDown() override {
    batcher_.reset();
    http_.reset();
  }

  testing::HttpResponse Call(const std::string& method, const std::string& path,
                             const std::string& body = "") {
    std::string error;
    auto r = testing::HttpRequest("127.0.0.1", http_->port(), method, path, body, 10000, &error);
    EXPECT_TRUE(r.has_value()) << error;
    return r.value_or(testing::HttpResponse{});
  }
  // The error message of a reply that must be `status`.
  std::string ErrorOf(const testing::HttpResponse& r, int status) {
    EXPECT_EQ(r.status, status) << r.body;
    Json j = Json::parse(r.body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error") && j.size() == 1) << r.body;
    return j.is_object() && j.contains("error") ? j["error"].get<std::string>() : "";
  }
  float Direct(int64_t c, const std::string& tag, float x) {
    tf::Example ex;
    auto& f = *ex.mutable_features()->mutable_feature();
    f["c"].mutable_int64_list()->add_value(c);
    f["tag"].mutable_bytes_list()->add_value(tag);
    f["x"].mutable_float_list()->add_value(x);
    const std::string bytes = ex.SerializeAsString();
    const std::string_view one[] = {bytes};
    std::vector<float> out;
    EXPECT_TRUE(repo_->Current()->Score(one, &out).ok());
    return out.empty() ? -1 : out[0];
  }

  static testing::TempDir* dir_;
  std::unique_ptr<ModelRepository> repo_;
  std::unique_ptr<Batcher> batcher_;
  std::unique_ptr<RestApi> api_;
  std::unique_ptr<HttpServer> http_;
  std::vector<int> codes_;
};

testing::TempDir* RestApiTest::dir_ = nullptr;

TEST_F(RestApiTest, PredictBothForms) {
  auto r = Call(
      "POST", "/v1/models/ctr:predict",
      R"({"instances": [{"c": 4, "tag": "red", "x": 0.5}, {"c": 9, "tag": ["blue"], "x": -1}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.headers.find("X-Brook-Model-Version: 3"), std::string::npos) << r.headers;
  EXPECT_NE(r.headers.find("application/json"), std::string::npos);
  Json j = Json::parse(r.body);
  ASSERT_EQ(j["predictions"].size(), 2u);
  EXPECT_NEAR(j["predictions"][0].get<double>(), Direct(4, "red", 0.5f), 1e-6);
  EXPECT_NEAR(j["predictions"][1].get<double>(), Direct(9, "blue", -1), 1e-6);

  r = Call("POST", "/v1/models/ctr/versions/3:predict",
           R"({"inputs": {"c": [4], "tag": [["red"]], "x": [0.5]}})");
  ASSERT_EQ(r.status, 200) << r.body;
  j = Json::parse(r.body);
  ASSERT_EQ(j["outputs"].size(), 1u);
  EXPECT_NEAR(j["outputs"][0].get<double>(), Direct(4, "red", 0.5f), 1e-6);
}

TEST_F(RestApiTest, StatusAndMetadata) {
  auto r = Call("GET", "/v1/models/ctr");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = Json::parse(r.body);
  ASSERT_EQ(j["model_version_status"].size(), 1u);
  EXPECT_EQ(j["model_version_status"][0]["version"], "3");
  EXPECT_EQ(j["model_version_status"][0]["state"], "AVAILABLE");
  EXPECT_EQ(j["model_version_status"][0]["status"]["error_code"], "OK");
  EXPECT_EQ(Call("GET", "/v1/models/ctr/versions/3").status, 200);

  r = Call("GET", "/v1/models/ctr/metadata");
  ASSERT_EQ(r.status, 200) << r.body;
  j = Json::parse(r.body);
  EXPECT_EQ(j["model_spec"]["name"], "ctr");
  EXPECT_EQ(j["model_spec"]["version"], "3");
  const Json& inputs = j["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"];
  EXPECT_EQ(inputs["c"]["dtype"], "DT_INT64");
  EXPECT_EQ(inputs["tag"]["dtype"], "DT_STRING");
  EXPECT_EQ(inputs["x"]["dtype"], "DT_FLOAT");
  EXPECT_FALSE(inputs.contains("label"));
  EXPECT_EQ(j["brook"]["job_id"], "job-1");
  EXPECT_EQ(j["brook"]["missing_features"], "error");
}

// Errors quote little of what the client sent, and the body stays small
// after JSON escaping (bytes that are not UTF-8 become 3-byte U+FFFD).
TEST_F(RestApiTest, ErrorsQuoteLittleOfTheRequest) {
  auto handle = [&](const std::string& target) {
    RestReply got;
    api_->Handle("POST", target, "{}", [&](RestReply r) { got = std::move(r); });
    return got;
  };
  for (const std::string& target :
       {"/v1/models/" + std::string(8000, 'm') + ":predict",
        "/v1/models/ctr:" + std::string(8000, 'v'),
        "/v1/models/ctr/versions/" + std::string(8000, '9') + ":predict",
        "/v2/" + std::string(8000, 'p'), "/v1/models/" + std::string(3000, '\xe9') + ":predict",
        "/v1/models/" + std::string(4000, '"') + ":predict"}) {
    const RestReply r = handle(target);
    EXPECT_EQ(r.status, 404) << r.body.substr(0, 100);
    EXPECT_LT(r.body.size(), 600u) << r.body.substr(0, 100);
    EXPECT_FALSE(Json::parse(r.body, nullptr, /*allow_exceptions=*/false).is_discarded());
  }
  // Whatever the message, the body is bounded.
  EXPECT_LE(ErrorBody(std::string(100000, '\x01')).size(), 2048u);
  EXPECT_LE(ErrorBody(std::string(100000, '\xff')).size(), 2048u);
}

TEST_F(RestApiTest, ErrorsInTfServingShape) {
  EXPECT_NE(ErrorOf(Call("POST", "/v1/models/ctr:predict", R"({"instances": [{"c": "x"}]})"), 400)
                .find("instances[0].c: expected int64"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(Call("POST", "/v1/models/ctr:predict", R"({"instances": [{"c": 1, "x": 2}]})"), 400)
          .find("tag"),
      std::string::npos);  // the missing feature is named
  EXPECT_NE(ErrorOf(Call("POST", "/v1/models/ctr:predict", "{not json"), 400).find("not JSON"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(Call("POST", "/v1/models/ctr:predict", R"({"instances": []})"), 400).find("empty"),
      std::string::npos);
  EXPECT_NE(ErrorOf(Call("POST", "/v1/models/other:predict", "{}"), 404).find("other"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Call("POST", "/v1/models/ctr/versions/4:predict", "{}"), 404)
                .find("serving version 3"),
            std::string::npos);
  ErrorOf(Call("GET", "/v1/models/ctr:predict"), 405);
  ErrorOf(Call("POST", "/v1/models/ctr"), 405);
  ErrorOf(Call("POST", "/v1/models/ctr:classify", "{}"), 404);
  ErrorOf(Call("GET", "/v2/whatever"), 404);
  ErrorOf(Call("GET", "/v1/models/ctr/versions/x"), 404);
  // Over the body limit, and not HTTP at all.
  EXPECT_NE(ErrorOf(Call("POST", "/v1/models/ctr:predict", std::string(70 << 10, ' ')), 413)
                .find("--max-request-bytes"),
            std::string::npos);
  std::string error;
  auto conn = testing::RawConnection::Connect(absl::StrCat("127.0.0.1:", http_->port()),
                                              std::chrono::milliseconds(3000), &error);
  ASSERT_NE(conn, nullptr) << error;
  ASSERT_TRUE(conn->Send("GARBAGE \x01\x02\r\n\r\n"));
  std::string got;
  EXPECT_TRUE(conn->ReadUntilClosed(std::chrono::milliseconds(5000), &got));
  EXPECT_NE(got.find("HTTP/1.1 400"), std::string::npos) << got;
  EXPECT_NE(got.find("malformed HTTP request"), std::string::npos) << got;
  // A POST without a Content-Length: 411, not an empty body.
  conn = testing::RawConnection::Connect(absl::StrCat("127.0.0.1:", http_->port()),
                                         std::chrono::milliseconds(3000), &error);
  ASSERT_NE(conn, nullptr) << error;
  ASSERT_TRUE(conn->Send("POST /v1/models/ctr:predict HTTP/1.1\r\nHost: x\r\n\r\n{}"));
  got.clear();
  EXPECT_TRUE(conn->ReadUntilClosed(std::chrono::milliseconds(5000), &got));
  EXPECT_NE(got.find("HTTP/1.1 411"), std::string::npos) << got;
  // Every reply was counted with its code.
  EXPECT_GE(codes_.size(), 12u);
}

// curl sends "Expect: 100-continue" before a body over 1 MiB and waits a
// second for the go-ahead: it gets it at once.
TEST_F(RestApiTest, ExpectContinueIsAnswered) {
  std::string error;
  auto conn = testing::RawConnection::Connect(absl::StrCat("127.0.0.1:", http_->port()),
                                              std::chrono::milliseconds(3000), &error);
  ASSERT_NE(conn, nullptr) << error;
  const std::string body = R"({"instances": [{"c": 4, "tag": "red", "x": 0.5}]})";
  ASSERT_TRUE(conn->Send(absl::StrCat("POST /v1/models/ctr:predict HTTP/1.1\r\nHost: x\r\n",
                                      "Connection: close\r\nExpect: 100-continue\r\n",
                                      "Content-Length: ", body.size(), "\r\n\r\n")));
  std::string got;
  // The go-ahead comes before the body is sent (the connection stays open).
  EXPECT_FALSE(conn->ReadUntilClosed(std::chrono::milliseconds(500), &got));
  EXPECT_NE(got.find("HTTP/1.1 100 Continue"), std::string::npos) << got;
  ASSERT_TRUE(conn->Send(body));
  EXPECT_TRUE(conn->ReadUntilClosed(std::chrono::milliseconds(5000), &got));
  EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos) << got;
  EXPECT_NE(got.find("predictions"), std::string::npos) << got;
}

TEST(HttpStatusForTest, TfServingCodes) {
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInternal), 500);
  EXPECT_EQ(Json::parse(ErrorBody("a \"b\"\n\xff")).at("error").get<std::string>().substr(0, 6),
            "a \"b\"\n");
}

}  // namespace
}  // namespace brook::serving
