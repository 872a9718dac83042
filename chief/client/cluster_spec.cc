#include "chief/client/cluster_spec.h"

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"

namespace brook::chief {
namespace {

using Json = nlohmann::json;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

bool HostCharOk(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

// Reads cluster.<role>: a list of host:port strings.
absl::StatusOr<std::vector<std::string>> RoleAddresses(const Json& list, const std::string& field) {
  if (!list.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: ", field, ": must be a list of \"host:port\" strings"));
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string entry = absl::StrCat(field, "[", i, "]");
    if (!list[i].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("TF_CONFIG: ", entry, ": must be a \"host:port\" string"));
    }
    std::string address = list[i].get<std::string>();
    if (absl::Status s = ValidateAddress(address); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: ", entry, ": ", s.message()));
    }
    out.push_back(std::move(address));
  }
  return out;
}

}  // namespace

absl::Status ValidateAddress(std::string_view address) {
  const std::string quoted = absl::StrCat("\"", std::string(address), "\"");
  std::string_view host;
  std::string_view port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat(quoted, " is not host:port (an IPv6 host is \"[ADDR]:PORT\")"));
    }
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
    for (char c : host) {
      const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      if (!hex && c != ':' && c != '.') {
        return absl::InvalidArgumentError(absl::StrCat(quoted, ": bad IPv6 address"));
      }
    }
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(quoted, " is not host:port (no port)"));
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    for (char c : host) {
      if (!HostCharOk(c)) {
        return absl::InvalidArgumentError(
            absl::StrCat(quoted, ": host has a bad character '", std::string(1, c), "'"));
      }
    }
  }
  if (host.empty()) return absl::InvalidArgumentError(absl::StrCat(quoted, ": empty host"));
  int value = 0;
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port) {
    if (c < '0' || c > '9') {
      digits = false;
      break;
    }
    value = value * 10 + (c - '0');
  }
  if (!digits || value < 1 || value > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(quoted, ": port must be a number in 1..65535"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ParseAddressList(std::string_view csv) {
  std::vector<std::string> out;
  if (Trim(csv).empty()) return out;
  size_t index = 0;
  while (true) {
    const size_t comma = csv.find(',');
    const std::string_view entry = Trim(csv.substr(0, comma));
    if (entry.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("address list entry ", index, " is empty"));
    }
    if (absl::Status s = ValidateAddress(entry); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("address list entry ", index, ": ", s.message()));
    }
    out.emplace_back(entry);
    if (comma == std::string_view::npos) break;
    csv.remove_prefix(comma + 1);
    ++index;
  }
  return out;
}

absl::StatusOr<ClusterSpec> ParseTfConfig(std::string_view json) {
  const Json doc = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError("TF_CONFIG: not a JSON object");
  }
  ClusterSpec spec;
  const auto cluster = doc.find("cluster");
  if (cluster == doc.end()) return absl::InvalidArgumentError("TF_CONFIG: cluster: missing");
  if (!cluster->is_object()) {
    return absl::InvalidArgumentError("TF_CONFIG: cluster: must be an object of role lists");
  }
  std::string chief_role;  // "chief" or "master", whichever named it
  for (const auto& [role, list] : cluster->items()) {
    const std::string field = absl::StrCat("cluster.", role);
    if (role == "chief" || role == "master") {
      if (!chief_role.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("TF_CONFIG: ", field, ": the cluster already has cluster.", chief_role,
                         " (\"master\" is another name for \"chief\")"));
      }
      absl::StatusOr<std::vector<std::string>> chief = RoleAddresses(list, field);
      if (!chief.ok()) return chief.status();
      if (chief->size() > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("TF_CONFIG: ", field, ": has ", chief->size(), " entries; at most one"));
      }
      chief_role = role;
      if (!chief->empty()) spec.chief = chief->front();
    } else if (role == "ps") {
      absl::StatusOr<std::vector<std::string>> ps = RoleAddresses(list, field);
      if (!ps.ok()) return ps.status();
      spec.ps = std::move(*ps);
    } else if (role == "worker") {
      absl::StatusOr<std::vector<std::string>> workers = RoleAddresses(list, field);
      if (!workers.ok()) return workers.status();
      spec.trainers = std::move(*workers);
    } else if (role == "evaluator") {
      if (!list.is_array()) {
        return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: ", field, ": must be a list"));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "TF_CONFIG: ", field, ": unknown role (chief, master, ps, worker or evaluator)"));
    }
  }

  const auto task = doc.find("task");
  if (task == doc.end()) return spec;
  if (!task->is_object()) return absl::InvalidArgumentError("TF_CONFIG: task: must be an object");
  const auto type = task->find("type");
  if (type == task->end() || !type->is_string()) {
    return absl::InvalidArgumentError("TF_CONFIG: task.type: missing or not a string");
  }
  spec.task_type = type->get<std::string>();
  if (spec.task_type == "master") spec.task_type = "chief";
  const std::vector<std::string>* members = nullptr;
  std::vector<std::string> chief_list;
  if (spec.task_type == "chief") {
    if (!spec.chief.empty()) chief_list.push_back(spec.chief);
    members = &chief_list;
  } else if (spec.task_type == "ps") {
    members = &spec.ps;
  } else if (spec.task_type == "worker") {
    members = &spec.trainers;
  } else if (spec.task_type != "evaluator") {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: task.type: \"", spec.task_type,
                     "\" is not a role (chief, master, ps, worker or evaluator)"));
  }
  const auto index = task->find("index");
  if (index == task->end()) {
    spec.task_index = 0;
  } else if (!index->is_number_integer() || index->get<int64_t>() < 0) {
    return absl::InvalidArgumentError("TF_CONFIG: task.index: must be an integer >= 0");
  } else {
    const int64_t i = index->get<int64_t>();
    // A worker's list is only Brook's to check when given: the job CLI and
    // `brook ps` read other keys, and say themselves what they need.
    const bool unlisted_worker = spec.task_type == "worker" && members->empty();
    if (members != nullptr && !unlisted_worker && static_cast<size_t>(i) >= members->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("TF_CONFIG: task.index: ", i, " is out of range: cluster.",
                       type->get<std::string>(), " has ", members->size(), " entries"));
    }
    if (i > 1000000) return absl::InvalidArgumentError("TF_CONFIG: task.index: too large");
    spec.task_index = static_cast<int>(i);
  }
  return spec;
}

absl::StatusOr<ClusterSpec> ClusterFromEnvironment() {
  const char* tf_config = std::getenv("TF_CONFIG");
  if (tf_config == nullptr || Trim(tf_config).empty()) {
    return absl::NotFoundError("TF_CONFIG is not set");
  }
  return ParseTfConfig(tf_config);
}

std::vector<std::string> HeadlessServiceAddresses(const std::string& statefulset,
                                                  const std::string& service, const std::string& ns,
                                                  int replicas, int port,
                                                  const std::string& cluster_domain) {
  std::vector<std::string> out;
  for (int i = 0; i < replicas; ++i) {
    out.push_back(absl::StrCat(statefulset, "-", i, ".", service, ".", ns, ".svc.", cluster_domain,
                               ":", port));
  }
  return out;
}

absl::StatusOr<std::string> ChiefAddress(const std::string& flag) {
  if (!flag.empty()) {
    if (absl::Status s = ValidateAddress(flag); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--chief: ", s.message()));
    }
    return flag;
  }
  if (const char* env = std::getenv("BROOK_CHIEF"); env != nullptr && *env != '\0') {
    const std::string address(Trim(env));
    if (absl::Status s = ValidateAddress(address); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("BROOK_CHIEF: ", s.message()));
    }
    return address;
  }
  absl::StatusOr<ClusterSpec> cluster = ClusterFromEnvironment();
  if (cluster.ok() && !cluster->chief.empty()) return cluster->chief;
  if (!cluster.ok() && !absl::IsNotFound(cluster.status())) return cluster.status();
  return absl::NotFoundError(
      "no chief address: pass --chief HOST:PORT or set BROOK_CHIEF=HOST:PORT (or TF_CONFIG with "
      "a cluster.chief entry)");
}

}  // namespace brook::chief
