// brook.v1.Node on every brook gRPC server (PsServer, ChiefServer): says what
// kind of node answers at this address, so a client that reached the wrong
// one can say so (grpc_error.h). No token: it tells no more than Health.
//
// Immutable after construction; thread-safe.
#pragma once

#include "brook/v1/node.grpc.pb.h"

namespace brook::rpc {

class NodeService final : public v1::Node::Service {
 public:
  // `shard_index` / `num_shards`: a PS's place in its cluster (0 / 0 otherwise).
  explicit NodeService(v1::NodeKind kind, int shard_index = 0, int num_shards = 0);

  grpc::Status Describe(grpc::ServerContext* context, const v1::DescribeRequest* request,
                        v1::DescribeResponse* response) override;

 private:
  v1::DescribeResponse self_;
};

}  // namespace brook::rpc
