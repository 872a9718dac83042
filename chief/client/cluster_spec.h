// Cluster discovery: where the chief and the PS nodes are, for the `brook`
// CLI and for pods started by Kubernetes.
//
// - TF_CONFIG, as Kubeflow's TFJob operator injects it into every pod:
//     {"cluster": {"chief": ["h:2222"], "ps": ["h0:2222", ...], "worker": [...]},
//      "task": {"type": "worker", "index": 0}}
//   "master" is accepted for "chief" (older TFJobs); "worker" are Brook's
//   trainers; "evaluator" entries are accepted and ignored. Other top-level
//   keys (Kubeflow adds "environment": "cloud") are ignored.
// - A StatefulSet's pods behind a headless Service have stable DNS names:
//   HeadlessServiceAddresses spells them out (the Helm chart's PS set).
// - Comma-separated host:port lists (flags such as --ps).
//
// Errors are InvalidArgument naming the field or entry that is wrong.
// Pure functions apart from the two that read the environment.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace brook::chief {

struct ClusterSpec {
  std::string chief;                  // host:port, "" when the cluster has none
  std::vector<std::string> ps;        // shard order
  std::vector<std::string> trainers;  // TF's "worker" role
  // This process's role: "chief" (also for TF_CONFIG's "master"), "ps",
  // "worker" or "evaluator"; "" when TF_CONFIG has no task.
  std::string task_type;
  int task_index = -1;  // -1 when there is no task
};

// Checks one "host:port": a non-empty host (a name, an IPv4 address or a
// bracketed IPv6 address such as "[::1]") and a decimal port in 1..65535.
absl::Status ValidateAddress(std::string_view address);

// "h1:1,h2:2" -> {"h1:1", "h2:2"}; blanks around entries are dropped; ""
// gives an empty list. An empty or malformed entry is InvalidArgument
// naming it and its position.
absl::StatusOr<std::vector<std::string>> ParseAddressList(std::string_view csv);

// Parses a TF_CONFIG value (see above). Errors start with "TF_CONFIG: " and
// name the field ("cluster.ps[1]", "task.index").
absl::StatusOr<ClusterSpec> ParseTfConfig(std::string_view json);

// ParseTfConfig($TF_CONFIG); NotFound when TF_CONFIG is unset or empty.
absl::StatusOr<ClusterSpec> ClusterFromEnvironment();

// The addresses of a StatefulSet's `replicas` pods behind the headless
// Service `service` in namespace `ns`:
//   "<statefulset>-<i>.<service>.<ns>.svc.<cluster_domain>:<port>", i = 0..replicas-1.
std::vector<std::string> HeadlessServiceAddresses(
    const std::string& statefulset, const std::string& service, const std::string& ns, int replicas,
    int port, const std::string& cluster_domain = "cluster.local");

// The chief the CLI talks to: `flag` (--chief) if set, else $BROOK_CHIEF,
// else TF_CONFIG's cluster.chief. InvalidArgument for a malformed address
// (naming where it came from) or a malformed TF_CONFIG; NotFound, saying to
// pass --chief or set BROOK_CHIEF, when none of them gives one.
absl::StatusOr<std::string> ChiefAddress(const std::string& flag);

}  // namespace brook::chief
