#include "chief/export/model_export.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>
#include "absl/strings/str_cat.h"
#include "chief/export/score_output.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "ps/client/local_ps_client.h"
#include "ps/client/prefixed_ps_client.h"
#include "storage/atomic_file.h"
#include "storage/crc32c.h"
#include "trainer/backend/cpu_backend.h"
#include "trainer/input/pipeline.h"
#include "trainer/model/model.h"

namespace brook::chief {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// XXH64 of the whole file, read through a read-only mapping (data files may
// be far larger than memory; the page cache holds what is touched).
absl::StatusOr<ExportedFile> HashFile(const std::string& path) {
  std::error_code ec;
  ExportedFile f;
  f.path = fs::absolute(path, ec).lexically_normal().string();
  if (ec) f.path = path;
  const int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string what = absl::StrCat("data file ", f.path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(what) : absl::PermissionDeniedError(what);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("data file ", f.path, ": not a regular file"));
  }
  f.bytes = static_cast<uint64_t>(st.st_size);
  if (f.bytes == 0) {
    ::close(fd);
    f.xxh64 = Hex64(Hash64(std::string_view()));
    return f;
  }
  void* p = ::mmap(nullptr, f.bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("data file ", f.path, ": mmap: ", std::strerror(err)));
  }
  ::madvise(p, f.bytes, MADV_SEQUENTIAL);
  f.xxh64 = Hex64(Hash64(std::string_view(static_cast<const char*>(p), f.bytes)));
  ::munmap(p, f.bytes);
  return f;
}

std::string Rfc3339(int64_t unix_micros) {
  const std::time_t secs = static_cast<std::time_t>(unix_micros / 1000000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Json Number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

Json EvalJson(const trainer::EvalResult& r) {
  return {{"examples", r.examples},
          {"auc", Number(r.auc)},
          {"logloss", Number(r.logloss)},
          {"accuracy", Number(r.accuracy)},
          {"calibration", Number(r.calibration)},
          {"mean_loss", Number(r.mean_loss)}};
}

Json FilesJson(const std::vector<ExportedFile>& files) {
  Json out = Json::array();
  for (const ExportedFile& f : files) {
    out.push_back({{"path", f.path}, {"bytes", f.bytes}, {"xxh64", f.xxh64}});
  }
  return out;
}

// Typed field access for FromJson: every error names the file and the
// field's path.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  absl::Status Error(const std::string& field, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": field '", field, "': ", std::string(what)));
  }
  absl::StatusOr<const Json*> Get(const Json& obj, const std::string& parent,
                                  const std::string& key, Json::value_t want) const {
    const std::string field = parent.empty() ? key : absl::StrCat(parent, ".", key);
    auto it = obj.find(key);
    if (it == obj.end()) return Error(field, "missing");
    bool ok = false;
    switch (want) {
      case Json::value_t::number_float:
        ok = it->is_number();
        break;
      case Json::value_t::number_unsigned:
        ok = it->is_number_unsigned();
        break;
      case Json::value_t::number_integer:
        ok = it->is_number_integer();
        break;
      default:
        ok = it->type() == want;
    }
    if (!ok) return Error(field, absl::StrCat("expected ", TypeName(want), ", got ", it->dump()));
    return &*it;
  }
  absl::StatusOr<std::string> String(const Json& obj, const std::string& parent,
                                     const std::string& key) const {
    ASSIGN_OR_RETURN(const Json* v, Get(obj, parent, key, Json::value_t::string));
    return v->get<std::string>();
  }
  absl::StatusOr<int64_t> Int(const Json& obj, const std::string& parent,
                              const std::string& key) const {
    ASSIGN_OR_RETURN(const Json* v, Get(obj, parent, key, Json::value_t::number_integer));
    return v->get<int64_t>();
  }
  absl::StatusOr<uint64_t> Uint(const Json& obj, const std::string& parent,
                                const std::string& key) const {
    ASSIGN_OR_RETURN(const Json* v, Get(obj, parent, key, Json::value_t::number_unsigned));
    return v->get<uint64_t>();
  }
  // A metric: a number, or null for NaN (an mse model has no AUC).
  absl::StatusOr<double> Metric(const Json& obj, const std::string& parent,
                                const std::string& key) const {
    auto it = obj.find(key);
    if (it != obj.end() && it->is_null()) return std::numeric_limits<double>::quiet_NaN();
    ASSIGN_OR_RETURN(const Json* v, Get(obj, parent, key, Json::value_t::number_float));
    return v->get<double>();
  }

 private:
  static std::string TypeName(Json::value_t t) {
    switch (t) {
      case Json::value_t::string:
        return "a string";
      case Json::value_t::number_integer:
        return "an integer";
      case Json::value_t::number_unsigned:
        return "a non-negative integer";
      case Json::value_t::number_float:
        return "a number";
      case Json::value_t::object:
        return "an object";
      case Json::value_t::array:
        return "an array";
      default:
        return "another type";
    }
  }
  std::string path_;
};

std::string Hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

bool ParseHex32(const std::string& s, uint32_t* out) {
  if (s.size() != 8) return false;
  uint32_t v = 0;
  for (char c : s) {
    if (c >= '0' && c <= '9')
      v = v * 16 + static_cast<uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v = v * 16 + static_cast<uint32_t>(c - 'a' + 10);
    else
      return false;
  }
  *out = v;
  return true;
}

bool IsHex16(const std::string& s) {
  return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

absl::StatusOr<std::vector<ExportedFile>> ReadFiles(const Reader& r, const Json& data,
                                                    const std::string& key) {
  ASSIGN_OR_RETURN(const Json* list, r.Get(data, "data", key, Json::value_t::array));
  std::vector<ExportedFile> out;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string field = absl::StrCat("data.", key, "[", i, "]");
    const Json& e = (*list)[i];
    if (!e.is_object()) return r.Error(field, "expected an object");
    ExportedFile f;
    ASSIGN_OR_RETURN(f.path, r.String(e, field, "path"));
    ASSIGN_OR_RETURN(f.bytes, r.Uint(e, field, "bytes"));
    ASSIGN_OR_RETURN(f.xxh64, r.String(e, field, "xxh64"));
    if (!IsHex16(f.xxh64)) return r.Error(field + ".xxh64", "expected 16 lowercase hex digits");
    out.push_back(std::move(f));
  }
  return out;
}

// The model's tables and dense variables, as the trainer declares them.
absl::Status DescribeModel(const JobSpec& spec, const std::string& prefix, ExportManifest* m) {
  ASSIGN_OR_RETURN(std::unique_ptr<trainer::Backend> backend,
                   trainer::CreateCpuBackend({.num_threads = 1}));
  ASSIGN_OR_RETURN(std::unique_ptr<trainer::Model> model,
                   trainer::Model::Create(spec.model, backend.get()));
  for (const trainer::TableSpec& t : model->layout().tables) {
    m->tables.push_back({t.name, absl::StrCat(prefix, t.name), t.dim});
  }
  for (const trainer::DenseVariableSpec& v : model->dense_variables()) {
    m->dense.push_back({v.name, absl::StrCat(prefix, v.name), v.shape});
  }
  return absl::OkStatus();
}

// FAILED_PRECONDITION naming the first table or dense variable of `m` that
// no shard holds (`where` says which PS).
absl::Status CheckOnPs(ps::PsClient* ps, const ExportManifest& m, const std::string& where) {
  ASSIGN_OR_RETURN(std::vector<ps::ServerStats> stats, ps->Stats());
  std::set<std::string> tables, dense;
  for (const ps::ServerStats& s : stats) {
    for (const ps::TableStats& t : s.tables) tables.insert(t.name);
    for (const ps::DenseStats& d : s.dense) dense.insert(d.name);
  }
  for (const ExportedTable& t : m.tables) {
    if (tables.count(t.ps_name) == 0) {
      return absl::FailedPreconditionError(absl::StrCat("job ", m.job_id, ": table '", t.ps_name,
                                                        "' of the model is not on ", where));
    }
  }
  for (const ExportedDense& d : m.dense) {
    if (dense.count(d.ps_name) == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", m.job_id, ": dense variable '", d.ps_name, "' of the model is not on ", where));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string ExportManifest::ToJson() const {
  Json tables_json = Json::array();
  for (const ExportedTable& t : tables) {
    tables_json.push_back({{"name", t.name}, {"ps_name", t.ps_name}, {"dim", t.dim}});
  }
  Json dense_json = Json::array();
  for (const ExportedDense& d : dense) {
    dense_json.push_back({{"name", d.name}, {"ps_name", d.ps_name}, {"shape", d.shape}});
  }
  Json manifests_json = Json::array();
  for (const ExportedPartManifest& p : checkpoint_manifests) {
    manifests_json.push_back({{"path", p.path}, {"bytes", p.bytes}, {"crc32c", Hex32(p.crc32c)}});
  }
  Json spec = Json::parse(spec_json, nullptr, /*allow_exceptions=*/false);
  Json j = {
      {"format", format},
      {"job_id", job_id},
      {"table_prefix", table_prefix},
      {"step", step},
      {"created_unix_micros", created_unix_micros},
      {"created", Rfc3339(created_unix_micros)},
      {"code", {{"version", version}, {"commit", commit}}},
      {"spec_hash", spec_hash},
      {"spec", spec},
      {"model", {{"tables", std::move(tables_json)}, {"dense", std::move(dense_json)}}},
      {"data", {{"train", FilesJson(train_files)}, {"eval", FilesJson(eval_files)}}},
      {"eval", eval.has_value() ? EvalJson(*eval) : Json(nullptr)},
      {"checkpoint",
       {{"dir", kExportTablesDir},
        {"shards", checkpoint_shards},
        {"parts", checkpoint_parts},
        {"manifests", std::move(manifests_json)},
        {"rows", checkpoint_rows},
        {"bytes", checkpoint_bytes}}},
  };
  return j.dump(2) + "\n";
}

absl::StatusOr<ExportManifest> ExportManifest::FromJson(const std::string& json,
                                                        const std::string& path) {
  const Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  const Reader r(path);
  ExportManifest m;
  ASSIGN_OR_RETURN(m.format, r.String(j, "", "format"));
  if (m.format != kExportFormat) {
    return r.Error("format", absl::StrCat("'", m.format, "' is not ", kExportFormat));
  }
  ASSIGN_OR_RETURN(m.job_id, r.String(j, "", "job_id"));
  if (m.job_id.empty()) return r.Error("job_id", "empty");
  ASSIGN_OR_RETURN(m.table_prefix, r.String(j, "", "table_prefix"));
  ASSIGN_OR_RETURN(m.step, r.Int(j, "", "step"));
  if (m.step < 0) return r.Error("step", "negative");
  ASSIGN_OR_RETURN(m.created_unix_micros, r.Int(j, "", "created_unix_micros"));
  ASSIGN_OR_RETURN(const Json* code, r.Get(j, "", "code", Json::value_t::object));
  ASSIGN_OR_RETURN(m.version, r.String(*code, "code", "version"));
  ASSIGN_OR_RETURN(m.commit, r.String(*code, "code", "commit"));
  ASSIGN_OR_RETURN(m.spec_hash, r.String(j, "", "spec_hash"));
  if (!IsHex16(m.spec_hash)) return r.Error("spec_hash", "expected 16 lowercase hex digits");
  ASSIGN_OR_RETURN(const Json* spec, r.Get(j, "", "spec", Json::value_t::object));
  m.spec_json = spec->dump();

  ASSIGN_OR_RETURN(const Json* model, r.Get(j, "", "model", Json::value_t::object));
  ASSIGN_OR_RETURN(const Json* tables, r.Get(*model, "model", "tables", Json::value_t::array));
  for (size_t i = 0; i < tables->size(); ++i) {
    const std::string field = absl::StrCat("model.tables[", i, "]");
    const Json& e = (*tables)[i];
    if (!e.is_object()) return r.Error(field, "expected an object");
    ExportedTable t;
    ASSIGN_OR_RETURN(t.name, r.String(e, field, "name"));
    ASSIGN_OR_RETURN(t.ps_name, r.String(e, field, "ps_name"));
    ASSIGN_OR_RETURN(int64_t dim, r.Int(e, field, "dim"));
    if (dim <= 0 || dim > ps::kMaxDim) return r.Error(field + ".dim", "out of range");
    t.dim = static_cast<int>(dim);
    if (t.ps_name != m.table_prefix + t.name) {
      return r.Error(field + ".ps_name", "is not table_prefix + name");
    }
    m.tables.push_back(std::move(t));
  }
  ASSIGN_OR_RETURN(const Json* dense, r.Get(*model, "model", "dense", Json::value_t::array));
  for (size_t i = 0; i < dense->size(); ++i) {
    const std::string field = absl::StrCat("model.dense[", i, "]");
    const Json& e = (*dense)[i];
    if (!e.is_object()) return r.Error(field, "expected an object");
    ExportedDense d;
    ASSIGN_OR_RETURN(d.name, r.String(e, field, "name"));
    ASSIGN_OR_RETURN(d.ps_name, r.String(e, field, "ps_name"));
    ASSIGN_OR_RETURN(const Json* shape, r.Get(e, field, "shape", Json::value_t::array));
    for (const Json& s : *shape) {
      if (!s.is_number_integer() || s.get<int64_t>() <= 0) {
        return r.Error(field + ".shape", "expected positive integers");
      }
      d.shape.push_back(s.get<int64_t>());
    }
    if (d.ps_name != m.table_prefix + d.name) {
      return r.Error(field + ".ps_name", "is not table_prefix + name");
    }
    m.dense.push_back(std::move(d));
  }

  ASSIGN_OR_RETURN(const Json* data, r.Get(j, "", "data", Json::value_t::object));
  ASSIGN_OR_RETURN(m.train_files, ReadFiles(r, *data, "train"));
  ASSIGN_OR_RETURN(m.eval_files, ReadFiles(r, *data, "eval"));

  auto eval_it = j.find("eval");
  if (eval_it == j.end()) return r.Error("eval", "missing (null when there was no evaluation)");
  if (!eval_it->is_null()) {
    if (!eval_it->is_object()) return r.Error("eval", "expected an object or null");
    trainer::EvalResult e;
    ASSIGN_OR_RETURN(e.examples, r.Int(*eval_it, "eval", "examples"));
    ASSIGN_OR_RETURN(e.auc, r.Metric(*eval_it, "eval", "auc"));
    ASSIGN_OR_RETURN(e.logloss, r.Metric(*eval_it, "eval", "logloss"));
    ASSIGN_OR_RETURN(e.accuracy, r.Metric(*eval_it, "eval", "accuracy"));
    ASSIGN_OR_RETURN(e.calibration, r.Metric(*eval_it, "eval", "calibration"));
    ASSIGN_OR_RETURN(e.mean_loss, r.Metric(*eval_it, "eval", "mean_loss"));
    m.eval = e;
  }

  ASSIGN_OR_RETURN(const Json* ckpt, r.Get(j, "", "checkpoint", Json::value_t::object));
  ASSIGN_OR_RETURN(std::string ckpt_dir, r.String(*ckpt, "checkpoint", "dir"));
  if (ckpt_dir != kExportTablesDir) {
    return r.Error("checkpoint.dir", absl::StrCat("expected '", kExportTablesDir, "'"));
  }
  ASSIGN_OR_RETURN(int64_t shards, r.Int(*ckpt, "checkpoint", "shards"));
  if (shards <= 0 || shards > (1 << 16)) return r.Error("checkpoint.shards", "out of range");
  m.checkpoint_shards = static_cast<int32_t>(shards);
  ASSIGN_OR_RETURN(const Json* parts, r.Get(*ckpt, "checkpoint", "parts", Json::value_t::array));
  for (size_t i = 0; i < parts->size(); ++i) {
    if (!(*parts)[i].is_string()) {
      return r.Error(absl::StrCat("checkpoint.parts[", i, "]"), "expected a string");
    }
    m.checkpoint_parts.push_back((*parts)[i].get<std::string>());
  }
  if (static_cast<int64_t>(m.checkpoint_parts.size()) != shards) {
    return r.Error("checkpoint.parts",
                   absl::StrCat(m.checkpoint_parts.size(), " parts for ", shards, " shards"));
  }
  if (ckpt->contains("manifests")) {  // absent in older exports
    ASSIGN_OR_RETURN(const Json* manifests,
                     r.Get(*ckpt, "checkpoint", "manifests", Json::value_t::array));
    for (size_t i = 0; i < manifests->size(); ++i) {
      const std::string field = absl::StrCat("checkpoint.manifests[", i, "]");
      const Json& e = (*manifests)[i];
      if (!e.is_object()) return r.Error(field, "expected an object");
      ExportedPartManifest p;
      ASSIGN_OR_RETURN(p.path, r.String(e, field, "path"));
      if (p.path.empty() || fs::path(p.path).is_absolute() ||
          p.path.find("..") != std::string::npos) {
        return r.Error(field + ".path", "expected a path inside the export");
      }
      ASSIGN_OR_RETURN(p.bytes, r.Uint(e, field, "bytes"));
      ASSIGN_OR_RETURN(std::string crc, r.String(e, field, "crc32c"));
      if (!ParseHex32(crc, &p.crc32c))
        return r.Error(field + ".crc32c", "expected 8 lowercase hex digits");
      m.checkpoint_manifests.push_back(std::move(p));
    }
  }
  ASSIGN_OR_RETURN(m.checkpoint_rows, r.Uint(*ckpt, "checkpoint", "rows"));
  ASSIGN_OR_RETURN(m.checkpoint_bytes, r.Uint(*ckpt, "checkpoint", "bytes"));
  return m;
}

absl::StatusOr<ExportManifest> WriteExport(ps::PsClient* ps, const JobSpec& spec,
                                           const ExportRequest& req) {
  if (req.dir.empty()) return absl::InvalidArgumentError("export: no directory given");
  if (req.job_id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("export ", req.dir, ": no job id given"));
  }
  std::error_code ec;
  const fs::path dir = fs::absolute(req.dir, ec).lexically_normal();
  const std::string manifest_path = (dir / kExportManifestName).string();
  if (fs::exists(manifest_path, ec)) {
    return absl::AlreadyExistsError(absl::StrCat("export ", dir.string(),
                                                 " already exists (it has a ", kExportManifestName,
                                                 "); exports are never overwritten"));
  }

  ExportManifest m;
  m.job_id = req.job_id;
  m.table_prefix = req.table_prefix;
  m.spec_json = spec.CanonicalJson();
  m.spec_hash = spec.SpecHash();
  m.step = req.step;
  m.version = Version();
  m.commit = GitCommit();
  m.eval = req.eval;
  // Hash first: a missing data file fails the export before the checkpoint.
  for (const std::string& f : req.train_files) {
    ASSIGN_OR_RETURN(ExportedFile h, HashFile(f));
    m.train_files.push_back(std::move(h));
  }
  for (const std::string& f : req.eval_files) {
    ASSIGN_OR_RETURN(ExportedFile h, HashFile(f));
    m.eval_files.push_back(std::move(h));
  }
  RETURN_IF_ERROR(DescribeModel(spec, req.table_prefix, &m));
  RETURN_IF_ERROR(CheckOnPs(ps, m, "the PS"));

  // An earlier attempt that died left tables/ without a manifest: start over.
  const fs::path tables = dir / kExportTablesDir;
  fs::remove_all(tables, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("export: removing ", tables.string(), ": ", ec.message()));
  }
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("export: creating ", dir.string(), ": ", ec.message()));
  }
  ps::CheckpointOptions o;
  o.dir = tables.string();
  o.table_prefix = req.table_prefix;  // this job's tables only
  o.step = req.step;
  ASSIGN_OR_RETURN(std::vector<ps::CheckpointInfo> parts, ps->Checkpoint(o));
  m.checkpoint_shards = static_cast<int32_t>(parts.size());
  for (const ps::CheckpointInfo& p : parts) {
    const fs::path rel = fs::path(p.shard_dir).lexically_relative(dir);
    m.checkpoint_parts.push_back(rel.empty() ? p.shard_dir : rel.string());
    m.checkpoint_manifests.push_back(
        {.path = (fs::path(m.checkpoint_parts.back()) / "MANIFEST").string(),
         .bytes = p.manifest_bytes,
         .crc32c = p.manifest_crc32c});
    m.checkpoint_rows += p.rows;
    m.checkpoint_bytes += p.bytes;
  }
  m.created_unix_micros = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  RETURN_IF_ERROR(storage::WriteFileAtomically(manifest_path, m.ToJson()));
  return m;
}

absl::StatusOr<LoadedExport> ReadExport(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("export ", dir, ": no such directory"));
  }
  const std::string path = (fs::path(dir) / kExportManifestName).string();
  absl::StatusOr<std::string> text = storage::ReadFileToString(path);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(
        absl::StrCat(dir, " is not a Brook export: it has no ", kExportManifestName,
                     " (an export is complete only once its manifest is written)"));
  }
  RETURN_IF_ERROR(text.status());
  LoadedExport out;
  out.dir = dir;
  ASSIGN_OR_RETURN(out.manifest, ExportManifest::FromJson(*text, path));
  absl::StatusOr<JobSpec> spec = SpecFromCanonicalJson(out.manifest.spec_json);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": field 'spec': ", spec.status().message()));
  }
  if (spec->SpecHash() != out.manifest.spec_hash) {
    return absl::DataLossError(absl::StrCat(path, ": field 'spec' hashes to ", spec->SpecHash(),
                                            ", not spec_hash ", out.manifest.spec_hash));
  }
  out.spec = *std::move(spec);
  const std::string tables = (fs::path(dir) / kExportTablesDir).string();
  if (!fs::is_directory(tables, ec)) {
    return absl::NotFoundError(absl::StrCat("export ", dir, ": no ", tables));
  }
  // Each part's MANIFEST is the one the export was written with (it pins
  // the part's files in turn, checked by the restore).
  for (const ExportedPartManifest& p : out.manifest.checkpoint_manifests) {
    const std::string file = (fs::path(dir) / p.path).string();
    absl::StatusOr<std::string> bytes = storage::ReadFileToString(file);
    if (!bytes.ok()) {
      return absl::DataLossError(
          absl::StrCat(file, ": ", bytes.status().message(), " (listed in ", path, ")"));
    }
    const uint32_t crc = storage::crc32c::Value(*bytes);
    if (bytes->size() != p.bytes || crc != p.crc32c) {
      return absl::DataLossError(
          absl::StrCat(file, ": ", bytes->size(), " bytes, CRC32C ", Hex32(crc), "; ", path,
                       " records ", p.bytes, " bytes, CRC32C ", Hex32(p.crc32c),
                       " (the part was replaced or changed since the export)"));
    }
  }
  return out;
}

absl::StatusOr<JobSpec> SpecFromCanonicalJson(const std::string& json) {
  // Canonical JSON is YAML, and parses back into the spec it was made from.
  return JobSpec::FromYaml(json, "");
}

absl::Status VerifyDataFiles(const ExportManifest& manifest) {
  for (const auto* list : {&manifest.train_files, &manifest.eval_files}) {
    for (const ExportedFile& f : *list) {
      ASSIGN_OR_RETURN(ExportedFile now, HashFile(f.path));
      if (now.bytes != f.bytes || now.xxh64 != f.xxh64) {
        return absl::FailedPreconditionError(absl::StrCat(
            "data file ", f.path, " changed since the export: ", now.bytes, " bytes, xxh64 ",
            now.xxh64, "; recorded ", f.bytes, " bytes, xxh64 ", f.xxh64));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<trainer::EvalResult> ScoreModel(ps::PsClient* ps, const JobSpec& spec,
                                               const std::vector<std::string>& files,
                                               const ScoreOptions& options) {
  if (files.empty()) return absl::InvalidArgumentError("score: no data files given");
  for (const trainer::DenseInputSpec& d : spec.model.dense) {
    if (d.transform == trainer::DenseTransform::kStandardize && !d.has_moments) {
      return absl::FailedPreconditionError(
          absl::StrCat("score: standardize input '", d.feature,
                       "' has no mean/stddev; the spec scored must be the one "
                       "trained, moments applied"));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<trainer::Backend> backend,
                   trainer::CreateCpuBackend({.num_threads = options.num_threads}));
  ASSIGN_OR_RETURN(std::unique_ptr<trainer::Trainer> t,
                   trainer::Trainer::Create(ps, spec.model, spec.features, spec.ToTrainerOptions(),
                                            backend.get()));
  // Declares the dense variables to this client (PullDense needs it); the
  // tables and variables exist, so nothing is created or changed.
  RETURN_IF_ERROR(t->Setup());
  input::PipelineOptions o;
  o.files = files;
  o.compression = spec.data.compression;
  o.batch_size = options.batch_size;
  o.parse_threads = options.parse_threads;
  o.shuffle_buffer = 0;
  o.epochs = 1;
  if (!options.on_example) {
    ASSIGN_OR_RETURN(std::unique_ptr<input::Pipeline> pipeline,
                     input::Pipeline::Create(spec.features, o));
    return t->Evaluate(pipeline.get());
  }
  // One file at a time: the stream is the records in file order, so the
  // i-th score is the i-th record's (skip_bad_examples is off: none drop).
  o.cycle_length = 1;
  ASSIGN_OR_RETURN(std::unique_ptr<input::Pipeline> pipeline,
                   input::Pipeline::Create(spec.features, o));
  std::unique_ptr<IdReader> ids;
  if (!options.id_feature.empty()) {
    ASSIGN_OR_RETURN(ids, IdReader::Open(files, spec.data.compression, options.id_feature));
  }
  return t->Evaluate(
      pipeline.get(),
      [&](absl::Span<const float> labels, absl::Span<const float> scores) -> absl::Status {
        for (size_t i = 0; i < scores.size(); ++i) {
          const tf::Feature* id = nullptr;
          if (ids != nullptr) {
            ASSIGN_OR_RETURN(id, ids->Next());
          }
          RETURN_IF_ERROR(options.on_example(labels[i], scores[i], id));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<trainer::EvalResult> ScoreExport(const LoadedExport& loaded,
                                                const std::vector<std::string>& files,
                                                const ScoreOptions& options) {
  ps::LocalPsCluster cluster(1);
  const std::string tables = (fs::path(loaded.dir) / kExportTablesDir).string();
  RETURN_IF_ERROR(cluster.client->Restore(tables).status());
  RETURN_IF_ERROR(CheckOnPs(cluster.client.get(), loaded.manifest, tables));
  ps::PrefixedPsClient job(cluster.client.get(), loaded.manifest.table_prefix);
  return ScoreModel(&job, loaded.spec, files, options);
}

absl::StatusOr<trainer::EvalResult> ScoreExport(const std::string& dir,
                                                const std::vector<std::string>& files,
                                                const ScoreOptions& options) {
  ASSIGN_OR_RETURN(LoadedExport loaded, ReadExport(dir));
  return ScoreExport(loaded, files, options);
}

}  // namespace brook::chief
