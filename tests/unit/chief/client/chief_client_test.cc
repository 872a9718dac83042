// ChiefClient against a real gRPC server on 127.0.0.1: a fixture service
// answering GetJob and ListJobs with fixed data (NOT_FOUND for an unknown id,
// a slow reply for "slow"), and every other RPC left UNIMPLEMENTED.
#include "chief/client/chief_client.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

namespace brook::chief {
namespace {

using ::testing::HasSubstr;

class FixtureChief final : public v1::Chief::Service {
 public:
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::JobStatus* reply) override {
    if (request->job_id() == "slow") {
      while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    }
    if (request->job_id() != "job-1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no job \"", request->job_id(), "\""));
    }
    reply->set_id("job-1");
    reply->set_state("RUNNING");
    if (request->with_events()) reply->add_events()->set_text("submitted");
    return grpc::Status::OK;
  }
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                        v1::ListJobsResponse* reply) override {
    reply->add_jobs()->set_id("job-1");
    reply->add_jobs()->set_id("job-2");
    return grpc::Status::OK;
  }
  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse*) override {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("spec: bad (", request->spec_json().size(), " bytes)"));
  }
};

class ChiefClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }

  std::unique_ptr<ChiefClient> Client(absl::Duration deadline = absl::Seconds(10)) {
    ChiefClientOptions options;
    options.deadline = deadline;
    absl::StatusOr<std::unique_ptr<ChiefClient>> client = ChiefClient::Connect(address_, options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  FixtureChief service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(ChiefClientTest, RepliesComeBack) {
  std::unique_ptr<ChiefClient> client = Client();
  EXPECT_EQ(client->address(), address_);
  v1::GetJobRequest request;
  request.set_job_id("job-1");
  request.set_with_events(true);
  absl::StatusOr<v1::JobStatus> job = client->GetJob(request);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), "RUNNING");
  ASSERT_EQ(job->events_size(), 1);
  absl::StatusOr<v1::ListJobsResponse> jobs = client->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->jobs_size(), 2);
  EXPECT_EQ(jobs->jobs(1).id(), "job-2");
}

TEST_F(ChiefClientTest, ErrorsKeepCodeAndMessage) {
  std::unique_ptr<ChiefClient> client = Client();
  v1::GetJobRequest request;
  request.set_job_id("nope");
  absl::StatusOr<v1::JobStatus> job = client->GetJob(request);
  EXPECT_EQ(job.status(), absl::NotFoundError("no job \"nope\""));

  v1::SubmitJobRequest submit;
  submit.set_spec_json("{}");
  EXPECT_EQ(client->SubmitJob(submit).status(), absl::InvalidArgumentError("spec: bad (2 bytes)"));

  v1::CancelJobRequest cancel;
  cancel.set_job_id("job-1");
  EXPECT_TRUE(absl::IsUnimplemented(client->CancelJob(cancel).status()));
  EXPECT_TRUE(absl::IsUnimplemented(client->Heartbeat({}).status()));
}

TEST_F(ChiefClientTest, SlowChiefIsDeadlineExceededAndUnreachable) {
  std::unique_ptr<ChiefClient> client = Client(absl::Milliseconds(200));
  v1::GetJobRequest request;
  request.set_job_id("slow");
  const absl::Time start = absl::Now();
  absl::Status status = client->GetJob(request).status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(
      std::string(status.message()),
      HasSubstr(absl::StrCat("chief at ", address_, " unreachable: no reply within 200ms")));
}

TEST_F(ChiefClientTest, ClosedPortIsUnavailableAndUnreachable) {
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
  std::unique_ptr<ChiefClient> client = Client(absl::Seconds(5));
  const absl::Time start = absl::Now();
  absl::Status status = client->ListJobs().status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // fails fast: not wait_for_ready
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat("chief at ", address_, " unreachable: ")));
}

TEST(ChiefClientConnectTest, RejectsBadOptions) {
  EXPECT_TRUE(absl::IsInvalidArgument(ChiefClient::Connect("").status()));
  ChiefClientOptions options;
  options.deadline = absl::ZeroDuration();
  EXPECT_TRUE(absl::IsInvalidArgument(ChiefClient::Connect("127.0.0.1:1", options).status()));
}

TEST(ChiefClientConnectTest, NeverSendsTheTokenInPlaintextOffTheMachine) {
  ChiefClientOptions options;
  options.bearer_token = "0123456789abcdef0123";
  const absl::Status s = ChiefClient::Connect("10.1.2.3:7000", options).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("plaintext"));
  EXPECT_TRUE(ChiefClient::Connect("127.0.0.1:7000", options).ok());
  EXPECT_TRUE(ChiefClient::Connect("localhost:7000", options).ok());
  options.bearer_token = "has space 0123456789";
  EXPECT_TRUE(absl::IsInvalidArgument(ChiefClient::Connect("127.0.0.1:7000", options).status()));
}

}  // namespace
}  // namespace brook::chief
