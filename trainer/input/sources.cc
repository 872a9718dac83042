#include "trainer/input/sources.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace brook::input::internal {

absl::StatusOr<std::vector<std::string>> ExpandGlob(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> paths;
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && paths.empty())) {
    return absl::NotFoundError(absl::StrCat("input glob \"", pattern, "\" matches no file"));
  }
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat(
        "input glob \"", pattern, "\": ", rc == GLOB_NOSPACE ? "out of memory" : "read error"));
  }
  std::sort(paths.begin(), paths.end());  // bytewise, whatever the locale
  return paths;
}

namespace {

absl::Status CheckFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("input file ", path, " does not exist"));
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("input file ", path, " is a directory"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<sharding::WorkUnit>> ResolveUnits(
    const std::vector<std::string>& files, const std::string& glob,
    const std::vector<sharding::WorkUnit>& units) {
  const int given = !files.empty() + !glob.empty() + !units.empty();
  if (given != 1) {
    return absl::InvalidArgumentError(
        "input pipeline needs exactly one source: files, glob or units");
  }
  std::vector<sharding::WorkUnit> out;
  if (!units.empty()) {
    absl::flat_hash_set<uint32_t> ids;
    for (const sharding::WorkUnit& u : units) {
      if (!ids.insert(u.id).second) {
        return absl::InvalidArgumentError(absl::StrCat("work unit id ", u.id, " given twice"));
      }
      if (u.end != 0 && u.end <= u.begin) {
        return absl::InvalidArgumentError(absl::StrCat("work unit ", u.id, " (", u.path,
                                                       "): empty record range [", u.begin, ", ",
                                                       u.end, ")"));
      }
      RETURN_IF_ERROR(CheckFile(u.path));
    }
    return units;
  }
  std::vector<std::string> paths = files;
  if (!glob.empty()) {
    ASSIGN_OR_RETURN(paths, ExpandGlob(glob));
  }
  for (size_t i = 0; i < paths.size(); ++i) {
    RETURN_IF_ERROR(CheckFile(paths[i]));
    out.push_back({.id = static_cast<uint32_t>(i), .path = paths[i], .begin = 0, .end = 0});
  }
  return out;
}

InterleavedReader::InterleavedReader(std::vector<sharding::WorkUnit> units,
                                     const InterleaveOptions& options)
    : units_(std::move(units)), options_(options) {
  slots_.resize(static_cast<size_t>(std::max(options_.cycle_length, 1)));
}

InterleavedReader::~InterleavedReader() = default;

absl::Status InterleavedReader::Open(const sharding::WorkUnit& unit, Slot* slot) {
  storage::TFRecordReaderOptions ro;
  ro.compression = options_.compression.value_or(storage::CompressionFromPath(unit.path));
  ro.skip_corrupt = options_.skip_corrupt;
  ASSIGN_OR_RETURN(slot->reader, storage::TFRecordReader::Open(unit.path, ro));
  slot->unit = &unit;
  ++closed_.files_opened;
  ++open_;
  // A unit starting inside the file: read up to its first record (TFRecord
  // has no index).
  std::string_view skipped;
  while (slot->reader->record_index() < unit.begin) {
    if (options_.cancelled != nullptr && slot->reader->record_index() % 4096 == 0 &&
        options_.cancelled->load(std::memory_order_relaxed)) {
      return absl::CancelledError(
          absl::StrCat("cancelled while skipping to record ", unit.begin, " of ", unit.path));
    }
    ASSIGN_OR_RETURN(bool more, slot->reader->Next(&skipped));
    if (!more) {
      return absl::OutOfRangeError(absl::StrCat(
          "work unit ", unit.id, ": ", unit.path, " has ", slot->reader->record_index(),
          " records, the unit begins at record ", unit.begin));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> InterleavedReader::ReadFrom(Slot* slot, std::string_view* record) {
  const sharding::WorkUnit& unit = *slot->unit;
  if (unit.end != 0 && slot->reader->record_index() >= unit.end) return false;
  ASSIGN_OR_RETURN(bool more, slot->reader->Next(record));
  if (!more && unit.end != 0) {
    return absl::OutOfRangeError(absl::StrCat("work unit ", unit.id, ": ", unit.path, " has ",
                                              slot->reader->record_index(),
                                              " records, the unit ends at record ", unit.end));
  }
  return more;
}

void InterleavedReader::Close(Slot* slot) {
  const storage::TFRecordReaderStats& s = slot->reader->stats();
  closed_.bytes += s.bytes;
  closed_.corrupt_regions += s.skipped_regions;
  closed_.corrupt_bytes += s.skipped_bytes;
  finished_.push_back({slot->unit->id, slot->reader->record_index()});
  slot->reader.reset();
  slot->unit = nullptr;
  --open_;
}

absl::StatusOr<bool> InterleavedReader::Next(std::string_view* record, RecordId* id) {
  if (!error_.ok()) return error_;
  while (true) {
    Slot& slot = slots_[cycle_];
    if (slot.reader != nullptr) {
      const uint64_t index = slot.reader->record_index();
      absl::StatusOr<bool> got = ReadFrom(&slot, record);
      if (!got.ok()) {
        error_ = got.status();
        return error_;
      }
      if (*got) {
        *id = {slot.unit->id, index};
        ++closed_.records;
        if (++block_ >= options_.block_length) Advance();
        return true;
      }
      Close(&slot);
      Advance();
    } else if (next_unit_ < units_.size()) {
      absl::Status s = Open(units_[next_unit_++], &slot);
      if (!s.ok()) {
        error_ = s;
        return error_;
      }
    } else if (open_ == 0) {
      return false;
    } else {
      Advance();
    }
  }
}

void InterleavedReader::TakeFinished(std::vector<UnitEnd>* out) {
  out->insert(out->end(), finished_.begin(), finished_.end());
  finished_.clear();
}

ReaderCounters InterleavedReader::counters() const {
  ReaderCounters c = closed_;
  for (const Slot& slot : slots_) {
    if (slot.reader == nullptr) continue;
    const storage::TFRecordReaderStats& s = slot.reader->stats();
    c.bytes += s.bytes;
    c.corrupt_regions += s.skipped_regions;
    c.corrupt_bytes += s.skipped_bytes;
  }
  return c;
}

}  // namespace brook::input::internal
