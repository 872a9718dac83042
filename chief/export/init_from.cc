#include "chief/export/init_from.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chief/export/model_export.h"
#include "common/status_macros.h"
#include "common/yaml_fields.h"
#include "ps/parameter_server.h"
#include "trainer/backend/cpu_backend.h"
#include "trainer/model/model.h"

namespace brook::chief {
namespace {

namespace fs = std::filesystem;
using yaml::FieldError;

// The model's parameters by name: a table's dim, or a dense variable's size.
struct ModelParameter {
  bool dense = false;
  uint64_t size = 0;
};

absl::StatusOr<std::map<std::string, ModelParameter>> ModelParameters(const JobSpec& spec) {
  std::map<std::string, ModelParameter> out;
  for (const trainer::TableSpec& t : spec.model.Layout().tables) {
    out[t.name] = {false, static_cast<uint64_t>(t.dim)};
  }
  ASSIGN_OR_RETURN(std::unique_ptr<trainer::Backend> backend,
                   trainer::CreateCpuBackend({.num_threads = 1}));
  ASSIGN_OR_RETURN(std::unique_ptr<trainer::Model> model,
                   trainer::Model::Create(spec.model, backend.get()));
  for (const trainer::DenseVariableSpec& v : model->dense_variables()) {
    out[v.name] = {true, static_cast<uint64_t>(v.num_floats())};
  }
  return out;
}

}  // namespace

absl::StatusOr<InitFromPlan> PlanInitFrom(const JobSpec& spec) {
  const JobInitFromSpec& init = spec.init_from;
  const int line = init.path_line;
  auto path_error = [&](const std::string& msg) {
    return FieldError(init.tables.empty() && line == 0 ? "init_from" : "init_from.path", line, msg);
  };
  InitFromPlan plan;
  std::error_code ec;
  if (!fs::is_directory(init.path, ec)) {
    return path_error(absl::StrCat(init.path, " is not a directory (an export or a checkpoint)"));
  }
  if (fs::exists(fs::path(init.path) / "manifest.json", ec)) {
    absl::StatusOr<LoadedExport> loaded = ReadExport(init.path);
    if (!loaded.ok()) return path_error(std::string(loaded.status().message()));
    plan.is_export = true;
    plan.checkpoint_dir = (fs::path(init.path) / "tables").string();
  } else {
    plan.checkpoint_dir = init.path;
  }
  absl::StatusOr<ps::CheckpointContents> src = ps::ReadCheckpointContents(plan.checkpoint_dir);
  if (!src.ok()) {
    return path_error(absl::StrCat(
        init.path, " is neither a Brook export (no manifest.json) nor a complete checkpoint: ",
        src.status().message()));
  }
  plan.from_prefix = src->table_prefix;
  std::map<std::string, ModelParameter> source;
  for (const ps::TableOptions& t : src->tables) {
    if (t.name.rfind(plan.from_prefix, 0) != 0) continue;
    source[t.name.substr(plan.from_prefix.size())] = {false, static_cast<uint64_t>(t.dim)};
  }
  for (const ps::DenseOptions& d : src->dense) {
    if (d.name.rfind(plan.from_prefix, 0) != 0) continue;
    source[d.name.substr(plan.from_prefix.size())] = {true, d.num_floats()};
  }
  ASSIGN_OR_RETURN(auto model, ModelParameters(spec));
  auto names_of = [](const std::map<std::string, ModelParameter>& m) {
    std::vector<std::string> v;
    for (const auto& [n, p] : m) v.push_back(n);
    return absl::StrJoin(v, ", ");
  };
  auto check = [&](const std::string& name, const std::string& field, int at) -> absl::Status {
    auto m = model.find(name);
    if (m == model.end()) {
      return FieldError(field, at,
                        absl::StrCat("the model has no table or dense variable \"", name,
                                     "\"; it has: ", names_of(model)));
    }
    auto s = source.find(name);
    if (s == source.end()) {
      return FieldError(field, at,
                        absl::StrCat(init.path, " holds no table or dense variable \"", name,
                                     "\"; it holds: ", names_of(source)));
    }
    if (s->second.dense != m->second.dense || s->second.size != m->second.size) {
      const char* what = m->second.dense ? "floats" : "dim";
      return FieldError(field, at,
                        absl::StrCat("\"", name, "\" has ", what, " ", s->second.size, " in ",
                                     init.path, " but ", m->second.size, " in this job's model"));
    }
    return absl::OkStatus();
  };
  if (!init.tables.empty()) {
    for (size_t i = 0; i < init.tables.size(); ++i) {
      RETURN_IF_ERROR(check(init.tables[i], absl::StrCat("init_from.tables[", i, "]"),
                            i < init.table_lines.size() ? init.table_lines[i] : 0));
      plan.names.push_back(init.tables[i]);
    }
  } else {
    for (const auto& [name, p] : model) {
      if (!source.contains(name)) continue;
      RETURN_IF_ERROR(check(name, "init_from.path", line));
      plan.names.push_back(name);
    }
    if (plan.names.empty()) {
      return path_error(absl::StrCat(init.path, " holds none of the model's tables (",
                                     names_of(model), "); it holds: ", names_of(source)));
    }
  }
  std::sort(plan.names.begin(), plan.names.end());
  return plan;
}

absl::StatusOr<InitFromResult> LoadInitFrom(ps::PsClient* job_ps, const JobSpec& spec,
                                            const InitFromPlan& plan) {
  {
    ASSIGN_OR_RETURN(std::unique_ptr<trainer::Backend> backend,
                     trainer::CreateCpuBackend({.num_threads = 1}));
    ASSIGN_OR_RETURN(std::unique_ptr<trainer::Trainer> t,
                     trainer::Trainer::Create(job_ps, spec.model, spec.features,
                                              spec.ToTrainerOptions(), backend.get()));
    RETURN_IF_ERROR(t->Setup());
  }
  ps::ImportOptions o;
  o.dir = plan.checkpoint_dir;
  o.names = plan.names;
  ASSIGN_OR_RETURN(std::vector<ps::ImportInfo> shards, job_ps->ImportTables(o));
  // Per name over shards: rows summed; slots kept or not (same on each).
  std::map<std::string, ps::ImportedPart> parts;
  for (const ps::ImportInfo& info : shards) {
    for (const ps::ImportedPart& p : info.parts) {
      ps::ImportedPart& sum = parts[p.name];
      sum.name = p.name;
      sum.dense = p.dense;
      sum.slots = p.slots;
      sum.rows += p.rows;
    }
  }
  InitFromResult out;
  std::vector<std::string> tables, dense, fresh_slots;
  for (const auto& [name, p] : parts) {
    const std::string bare = name.substr(name.find('/') + 1);
    if (p.dense) {
      dense.push_back(bare);
    } else {
      tables.push_back(absl::StrCat(bare, " (", p.rows, " rows)"));
      out.rows += p.rows;
    }
    if (!p.slots) fresh_slots.push_back(bare);
  }
  out.event = absl::StrCat(
      "init_from: loaded ", tables.size(), " tables [", absl::StrJoin(tables, ", "), "], ",
      out.rows, " rows, and ", dense.size(), " dense variables [", absl::StrJoin(dense, ", "),
      "] from ", plan.is_export ? "the export " : "the checkpoint ",
      plan.is_export ? fs::path(plan.checkpoint_dir).parent_path().string() : plan.checkpoint_dir,
      " (job ",
      plan.from_prefix.empty() ? "?" : plan.from_prefix.substr(0, plan.from_prefix.size() - 1),
      "); everything else starts from its initializers");
  if (!fresh_slots.empty()) {
    absl::StrAppend(
        &out.event, "; weights only, optimizer slots from the new optimizer's init ",
        "(another optimizer type than the source's): ", absl::StrJoin(fresh_slots, ", "));
  }
  return out;
}

}  // namespace brook::chief
