#include "common/rpc/node_service.h"

#include "common/version.h"

namespace brook::rpc {

NodeService::NodeService(v1::NodeKind kind, int shard_index, int num_shards) {
  self_.set_kind(kind);
  self_.set_version(Version());
  self_.set_shard_index(shard_index);
  self_.set_num_shards(num_shards);
}

grpc::Status NodeService::Describe(grpc::ServerContext*, const v1::DescribeRequest*,
                                   v1::DescribeResponse* response) {
  *response = self_;
  return grpc::Status::OK;
}

}  // namespace brook::rpc
