#include "tests/cluster/exported_model.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chief/export/model_export.h"
#include "ps/parameter_server.h"

namespace brook::testing {

size_t ExportedModel::row_count() const {
  size_t n = 0;
  for (const auto& [table, r] : rows) n += r.size();
  return n;
}

absl::StatusOr<ExportedModel> LoadExportedModel(const std::string& dir) {
  absl::StatusOr<chief::LoadedExport> loaded = chief::ReadExport(dir);
  if (!loaded.ok()) return loaded.status();
  ExportedModel model;
  model.step = loaded->manifest.step;
  ps::ParameterServer ps{ps::ParameterServerOptions{}};
  if (absl::StatusOr<ps::RestoreInfo> r = ps.Restore(absl::StrCat(dir, "/tables")); !r.ok()) {
    return r.status();
  }
  const std::string& prefix = loaded->manifest.table_prefix;
  const ps::ServerStats held = ps.Stats();
  for (const ps::TableStats& t : held.tables) {
    if (!absl::StartsWith(t.name, prefix)) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir, ": holds table ", t.name, " of another job (prefix ", prefix, ")"));
    }
  }
  for (const ps::DenseStats& d : held.dense) {
    if (!absl::StartsWith(d.name, prefix)) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir, ": holds dense variable ", d.name, " of another job"));
    }
  }
  if (held.tables.size() != loaded->manifest.tables.size()) {
    return absl::DataLossError(absl::StrCat(
        dir, ": ", held.tables.size(), " tables, manifest names ", loaded->manifest.tables.size()));
  }
  for (const chief::ExportedTable& t : loaded->manifest.tables) {
    auto& rows = model.rows[t.name];
    absl::Status s = ps.ScanTable(
        t.ps_name, [&](uint64_t key, absl::Span<const float> w, absl::Span<const float> slots) {
          std::vector<float>& row = rows[key];
          row.assign(w.begin(), w.end());
          row.insert(row.end(), slots.begin(), slots.end());
        });
    if (!s.ok()) return s;
  }
  for (const chief::ExportedDense& d : loaded->manifest.dense) {
    int64_t n = 1;
    for (int64_t s : d.shape) n *= s;
    std::vector<float>& v = model.dense[d.name];
    v.resize(static_cast<size_t>(n));
    if (absl::Status s = ps.PullDense(d.ps_name, absl::MakeSpan(v)); !s.ok()) return s;
  }
  return model;
}

namespace {
bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
}  // namespace

std::string DiffExportedModels(const ExportedModel& want, const ExportedModel& got) {
  if (want.step != got.step) return absl::StrCat("step ", got.step, ", want ", want.step);
  if (want.rows.size() != got.rows.size()) {
    return absl::StrCat(got.rows.size(), " tables, want ", want.rows.size());
  }
  std::string first;
  size_t rows = 0, differing = 0;
  for (const auto& [table, want_rows] : want.rows) {
    auto it = got.rows.find(table);
    if (it == got.rows.end()) return absl::StrCat("no table ", table);
    if (it->second.size() != want_rows.size()) {
      return absl::StrCat("table ", table, ": ", it->second.size(), " rows, want ",
                          want_rows.size());
    }
    for (const auto& [key, row] : want_rows) {
      ++rows;
      auto g = it->second.find(key);
      if (g == it->second.end() || !SameBits(g->second, row)) {
        if (first.empty()) first = absl::StrCat("table ", table, " key ", key);
        ++differing;
      }
    }
  }
  if (differing > 0) {
    return absl::StrCat(differing, " of ", rows, " rows differ (first: ", first, ")");
  }
  if (want.dense.size() != got.dense.size()) {
    return absl::StrCat(got.dense.size(), " dense variables, want ", want.dense.size());
  }
  for (const auto& [name, v] : want.dense) {
    auto it = got.dense.find(name);
    if (it == got.dense.end()) return absl::StrCat("no dense variable ", name);
    if (!SameBits(it->second, v)) return absl::StrCat("dense variable ", name, " differs");
  }
  return "";
}

}  // namespace brook::testing
