#include "common/rpc/status_mapping.h"

#include <gtest/gtest.h>

namespace brook::rpc {
namespace {

TEST(StatusMappingTest, DesignCodesMapOneToOne) {
  struct Case {
    absl::Status in;
    grpc::StatusCode want;
  };
  const Case cases[] = {
      {absl::InvalidArgumentError("bad"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::NotFoundError("t"), grpc::StatusCode::NOT_FOUND},
      {absl::ResourceExhaustedError("big"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::FailedPreconditionError("window"), grpc::StatusCode::FAILED_PRECONDITION},
      {absl::AlreadyExistsError("t"), grpc::StatusCode::ALREADY_EXISTS},
      {absl::UnavailableError("drain"), grpc::StatusCode::UNAVAILABLE},
      {absl::DeadlineExceededError("slow"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::InternalError("bug"), grpc::StatusCode::INTERNAL},
      {absl::DataLossError("crc"), grpc::StatusCode::DATA_LOSS},
  };
  for (const Case& c : cases) {
    grpc::Status g = ToGrpcStatus(c.in);
    EXPECT_EQ(g.error_code(), c.want) << c.in;
    EXPECT_EQ(g.error_message(), std::string(c.in.message()));
    absl::Status back = FromGrpcStatus(g);
    EXPECT_EQ(back.code(), c.in.code());
    EXPECT_EQ(back.message(), c.in.message());
  }
}

TEST(StatusMappingTest, EveryCanonicalCodeRoundTrips) {
  for (int code = 0; code <= 16; ++code) {
    const auto a = static_cast<absl::StatusCode>(code);
    EXPECT_EQ(static_cast<int>(ToGrpcCode(a)), code);
    EXPECT_EQ(FromGrpcCode(ToGrpcCode(a)), a);
  }
}

TEST(StatusMappingTest, OkIsOkAndUnknownCodesAreUnknown) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  EXPECT_EQ(ToGrpcCode(static_cast<absl::StatusCode>(42)), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(FromGrpcCode(42), absl::StatusCode::kUnknown);
  EXPECT_EQ(FromGrpcCode(-7), absl::StatusCode::kUnknown);
}

}  // namespace
}  // namespace brook::rpc
