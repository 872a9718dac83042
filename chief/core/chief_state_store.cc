#include "chief/core/chief_state_store.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "brook/v1/chief.pb.h"
#include "chief/core/job_queue_state.h"
#include "common/status_macros.h"
#include "storage/rocks_db.h"

namespace brook::chief {
namespace {

constexpr char kFamily[] = "chief";
constexpr uint64_t kMetaKey = 0;
constexpr size_t kHeader = 4;

// Frames `payload` into `out` (value_bytes long, zero padded).
void Frame(const std::string& payload, size_t value_bytes, char* out) {
  const uint32_t n = static_cast<uint32_t>(payload.size());
  for (size_t i = 0; i < kHeader; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::memcpy(out + kHeader, payload.data(), payload.size());
  std::memset(out + kHeader + payload.size(), 0, value_bytes - kHeader - payload.size());
}

// The payload of a framed value, or nullopt if the frame is broken.
std::optional<std::string_view> Unframe(std::string_view value) {
  if (value.size() < kHeader) return std::nullopt;
  uint32_t n = 0;
  for (size_t i = 0; i < kHeader; ++i) n |= uint32_t{static_cast<uint8_t>(value[i])} << (8 * i);
  if (n > value.size() - kHeader) return std::nullopt;
  return value.substr(kHeader, n);
}

}  // namespace

ChiefStateStore::ChiefStateStore(std::string dir, std::unique_ptr<storage::RocksDb> db)
    : dir_(std::move(dir)), db_(std::move(db)) {}

ChiefStateStore::~ChiefStateStore() = default;

absl::StatusOr<std::unique_ptr<ChiefStateStore>> ChiefStateStore::Open(const std::string& dir) {
  storage::RocksDbOptions options;
  options.block_cache_bytes = 8ull << 20;  // a few jobs' records, not rows
  options.write_buffer_bytes = 4ull << 20;
  options.disable_wal = false;  // every Save must survive a crash
  options.create_if_missing = true;
  ASSIGN_OR_RETURN(std::unique_ptr<storage::RocksDb> db, storage::RocksDb::Open(dir, options));
  RETURN_IF_ERROR(db->CreateColumnFamily(kFamily));
  return std::unique_ptr<ChiefStateStore>(new ChiefStateStore(dir, std::move(db)));
}

absl::StatusOr<std::unique_ptr<JobQueue>> ChiefStateStore::Load(const JobQueueOptions& options,
                                                                absl::Time now) {
  std::optional<v1::ChiefQueueMeta> meta;
  std::map<uint64_t, std::optional<std::string>> raw;  // seq -> payload (nullopt: bad frame)
  RETURN_IF_ERROR(db_->ForEach(kFamily, [&](uint64_t key, std::string_view value) -> absl::Status {
    std::optional<std::string_view> payload = Unframe(value);
    if (key == kMetaKey) {
      meta.emplace();
      if (!payload.has_value() ||
          !meta->ParseFromArray(payload->data(), static_cast<int>(payload->size()))) {
        return absl::DataLossError(absl::StrCat(dir_, ": the queue's meta record is corrupt"));
      }
      return absl::OkStatus();
    }
    // Named once the meta is known (it sorts first, key 0).
    raw[key] = payload.has_value() ? std::optional<std::string>(*payload) : std::nullopt;
    return absl::OkStatus();
  }));
  if (!meta.has_value()) {
    if (!raw.empty()) {
      return absl::DataLossError(
          absl::StrCat(dir_, ": ", raw.size(), " job records but no queue meta record"));
    }
    saved_versions_.clear();
    saved_next_seq_ = 0;
    return JobQueue::Create(options);
  }
  auto name = [&](uint64_t seq) {
    auto it = meta->job_ids().find(seq);
    return it == meta->job_ids().end() ? absl::StrCat("seq ", seq)
                                       : absl::StrCat("'", it->second, "' (seq ", seq, ")");
  };
  // A record that cannot be read becomes a FAILED job saying why, under a
  // name of its own: one bad record never stops the chief.
  auto unreadable = [&](uint64_t seq, const std::string& why) {
    v1::ChiefJobRecord r;
    r.set_seq(seq);
    r.set_name("unreadable");
    r.set_id(absl::StrCat("unreadable-", seq));
    r.set_state(static_cast<int32_t>(JobState::kFailed));
    r.set_message(
        absl::StrCat("the chief could not read job ", name(seq), " from ", dir_, ": ", why));
    r.set_trainers_wanted(1);
    return r;
  };
  std::vector<v1::ChiefJobRecord> records;
  for (const auto& [seq, payload] : raw) {
    v1::ChiefJobRecord record;
    if (!payload.has_value() || !record.ParseFromString(*payload)) {
      records.push_back(unreadable(seq, "corrupt record"));
      continue;
    }
    if (record.seq() != seq || meta->job_ids().count(seq) == 0 ||
        meta->job_ids().at(seq) != record.id()) {
      records.push_back(
          unreadable(seq, absl::StrCat("stored under key ", seq, " but the record is '",
                                       record.id(), "' seq ", record.seq())));
      continue;
    }
    records.push_back(std::move(record));
  }
  for (const auto& [seq, id] : meta->job_ids()) {
    if (raw.count(seq) == 0) records.push_back(unreadable(seq, "record missing"));
  }
  auto queue = JobQueueCodec::Restore(options, records, meta->next_seq(), now);
  if (!queue.ok()) {
    return absl::Status(queue.status().code(), absl::StrCat(dir_, ": ", queue.status().message()));
  }
  saved_versions_.clear();
  for (const std::string& id : (*queue)->JobIds()) {
    saved_versions_[*(*queue)->Seq(id)] = *(*queue)->Version(id);
  }
  saved_next_seq_ = meta->next_seq();
  return queue;
}

absl::Status ChiefStateStore::Save(const JobQueue& queue) {
  std::vector<uint64_t> keys;
  std::vector<std::string> payloads;
  std::map<uint64_t, uint64_t> versions;
  v1::ChiefQueueMeta meta;
  meta.set_next_seq(queue.next_seq());
  for (const std::string& id : queue.JobIds()) {
    ASSIGN_OR_RETURN(uint64_t seq, queue.Seq(id));
    ASSIGN_OR_RETURN(uint64_t version, queue.Version(id));
    (*meta.mutable_job_ids())[seq] = id;
    versions[seq] = version;
    auto saved = saved_versions_.find(seq);
    if (saved != saved_versions_.end() && saved->second == version) continue;
    ASSIGN_OR_RETURN(v1::ChiefJobRecord record, JobQueueCodec::ToRecord(queue, id));
    keys.push_back(seq);
    payloads.push_back(record.SerializeAsString());
  }
  if (keys.empty() && queue.next_seq() == saved_next_seq_) return absl::OkStatus();
  keys.push_back(kMetaKey);
  payloads.push_back(meta.SerializeAsString());
  size_t value_bytes = 0;
  for (const std::string& p : payloads) value_bytes = std::max(value_bytes, kHeader + p.size());
  std::string values(value_bytes * keys.size(), '\0');
  for (size_t i = 0; i < keys.size(); ++i)
    Frame(payloads[i], value_bytes, &values[i * value_bytes]);
  RETURN_IF_ERROR(db_->Write(kFamily, keys, values.data(), value_bytes, {}));
  saved_versions_ = std::move(versions);
  saved_next_seq_ = queue.next_seq();
  return absl::OkStatus();
}

}  // namespace brook::chief
