// Shared by the PsClient tests: N in-process PS shards behind a LocalPsClient
// or a GrpcPsClient (in-process channels or loopback TCP), and the reference
// a client's push must equal (gradients summed per key, pushed to one PS).
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ps/client/grpc_ps_client.h"
#include "ps/client/local_ps_client.h"
#include "ps/rpc/ps_server.h"

namespace brook::ps::testing_cluster {

enum class Kind { kLocal, kGrpcInProcess, kGrpcTcp };

// N shards and a client over them.
struct Cluster {
  std::vector<std::unique_ptr<ParameterServer>> local;
  std::vector<std::unique_ptr<rpc::PsServer>> servers;
  std::unique_ptr<PsClient> client;

  ParameterServer* shard(int i) {
    return local.empty() ? servers[i]->parameter_server() : local[i].get();
  }
};

inline std::unique_ptr<Cluster> MakeCluster(Kind kind, int shards) {
  auto c = std::make_unique<Cluster>();
  if (kind == Kind::kLocal) {
    std::vector<ParameterServer*> ptrs;
    for (int i = 0; i < shards; ++i) {
      ParameterServerOptions o;
      o.shard_index = i;
      o.num_shards = shards;
      c->local.push_back(std::make_unique<ParameterServer>(o));
      ptrs.push_back(c->local.back().get());
    }
    c->client = std::make_unique<LocalPsClient>(ptrs);
    return c;
  }
  GrpcPsClientOptions co;
  co.deadline = absl::Seconds(20);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < shards; ++i) {
    rpc::PsServerOptions o;
    o.metrics_listen = "";
    o.ps.shard_index = i;
    o.ps.num_shards = shards;
    auto server = rpc::PsServer::Start(o);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return nullptr;
    co.addresses.push_back((*server)->address());
    channels.push_back((*server)->InProcessChannel());
    c->servers.push_back(std::move(*server));
  }
  absl::StatusOr<std::unique_ptr<GrpcPsClient>> client =
      kind == Kind::kGrpcTcp ? GrpcPsClient::Create(co) : GrpcPsClient::FromChannels(channels, co);
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return nullptr;
  c->client = std::move(*client);
  return c;
}

// Another client over the cluster's shards (another trainer): its own
// random client id.
inline std::unique_ptr<PsClient> SecondClient(Kind kind, Cluster& c) {
  if (kind == Kind::kLocal) {
    std::vector<ParameterServer*> ptrs;
    for (auto& shard : c.local) ptrs.push_back(shard.get());
    return std::make_unique<LocalPsClient>(ptrs);
  }
  GrpcPsClientOptions co;
  co.deadline = absl::Seconds(20);
  for (auto& server : c.servers) co.addresses.push_back(server->address());
  absl::StatusOr<std::unique_ptr<GrpcPsClient>> client = GrpcPsClient::Create(co);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

// What the client should have sent: gradients summed per key in input order.
inline std::map<uint64_t, std::vector<float>> SumByKey(const std::vector<uint64_t>& keys,
                                                       const std::vector<float>& grads, int dim) {
  std::map<uint64_t, std::vector<float>> sums;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto [it, inserted] = sums.try_emplace(keys[i], std::vector<float>(dim, 0.0f));
    for (int d = 0; d < dim; ++d) it->second[d] += grads[i * dim + d];
  }
  return sums;
}

inline absl::Status ReferencePush(ParameterServer& ref, const std::string& table,
                                  const std::vector<uint64_t>& keys,
                                  const std::vector<float>& grads, int dim, int64_t step) {
  std::vector<uint64_t> unique;
  std::vector<float> summed;
  for (const auto& [k, g] : SumByKey(keys, grads, dim)) {
    unique.push_back(k);
    summed.insert(summed.end(), g.begin(), g.end());
  }
  PushContext ctx;
  ctx.step = step;
  return ref.Push(table, unique, summed, ctx).status();
}

inline std::string KindName(const ::testing::TestParamInfo<Kind>& info) {
  switch (info.param) {
    case Kind::kLocal:
      return "Local";
    case Kind::kGrpcInProcess:
      return "GrpcInProcess";
    case Kind::kGrpcTcp:
      return "GrpcTcp";
  }
  return "?";
}

}  // namespace brook::ps::testing_cluster
