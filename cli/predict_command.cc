// `brook predict` and `brook eval`: score model exports (chief/export) on
// TFRecord data, in this process (the export is restored into an in-process
// PS; no cluster needed).
//
//   brook predict --model DIR [--data GLOB_OR_FILE...]
//       [--output FILE.csv|FILE.tfrecord [--id-feature NAME]]
//       prints {"model", "job_id", "step", "examples", "auc", "logloss",
//       "accuracy", "calibration", "mean_loss", "recorded_auc"} on stdout:
//       the scores on --data beside the AUC the export recorded at the end
//       of its job. --output also writes every example's label and score
//       (and its --id-feature) to FILE, in the format its extension names
//       (chief/export/score_output.h), and adds "output" and "rows".
//   brook eval --model DIR --baseline DIR [--data ...] [--metric auc|logloss]
//       [--margin 0.005]
//       scores both on the same data and exits 1 when the model is worse
//       than the baseline by more than the margin (AUC lower, or logloss
//       higher): the model-validation gate before a model is pushed.
//
// --data defaults to the eval files the (first) export recorded. Exit codes
// (commands.h): 2 for a bad export directory, glob or flag, the message
// naming the path; 1 when scoring fails, or for `eval` a worse model.
#include <glob.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "chief/export/model_export.h"
#include "chief/export/score_output.h"
#include "cli/commands.h"
#include "common/status_macros.h"
#include "trainer/input/data_check.h"

namespace brook::cli {
namespace {

using Json = nlohmann::json;

// Each argument is a file or a shell glob; matches sorted, in argument order.
// NOT_FOUND naming the argument that matches nothing.
absl::StatusOr<std::vector<std::string>> ExpandData(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  for (const std::string& a : args) {
    if (a.find_first_of("*?[") == std::string::npos) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(a, ec)) {
        return absl::NotFoundError(absl::StrCat("--data ", a, ": no such file"));
      }
      files.push_back(a);
      continue;
    }
    glob_t g{};
    const int rc = ::glob(a.c_str(), 0, nullptr, &g);
    if (rc == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
    }
    ::globfree(&g);
    if (rc != 0) return absl::NotFoundError(absl::StrCat("--data ", a, ": matches no file"));
  }
  return files;
}

// The files to score: --data, or the eval files `loaded` recorded.
absl::StatusOr<std::vector<std::string>> DataFiles(const std::vector<std::string>& data,
                                                   const chief::LoadedExport& loaded) {
  if (!data.empty()) return ExpandData(data);
  std::vector<std::string> files;
  for (const chief::ExportedFile& f : loaded.manifest.eval_files) files.push_back(f.path);
  if (files.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("export ", loaded.dir, " recorded no eval files: pass --data"));
  }
  return ExpandData(files);
}

// --compression over what each export's spec says (auto: from each file's
// name), then the files checked as a job's are (input::CheckData): each a
// TFRecord, the first records parsing under the export's feature spec.
// Warnings go to stderr under `command`.
absl::Status PrepareData(const std::string& command, const std::string& compression,
                         const std::vector<std::string>& files, chief::LoadedExport* loaded) {
  if (compression == "auto") loaded->spec.data.compression.reset();
  if (compression == "none") loaded->spec.data.compression = storage::Compression::kNone;
  if (compression == "gzip") loaded->spec.data.compression = storage::Compression::kGzip;
  if (compression == "zlib") loaded->spec.data.compression = storage::Compression::kZlib;
  ASSIGN_OR_RETURN(input::DataCheckResult checked,
                   input::CheckData(loaded->spec.features, {{"--data", files}},
                                    {.compression = loaded->spec.data.compression,
                                     .skip_corrupt = loaded->spec.data.skip_corrupt}));
  for (const std::string& w : checked.warnings) {
    std::cerr << "brook " << command << ": warning: " << w << "\n";
  }
  return absl::OkStatus();
}

void AddCompressionFlag(CLI::App* cmd, std::string* compression) {
  cmd->add_option("--compression", *compression,
                  "Compression of the --data files: auto (from each file's "
                  "name: .gz GZIP, .zlib ZLIB), none, gzip, zlib; default: "
                  "what the export's job spec says")
      ->check(CLI::IsMember({"auto", "none", "gzip", "zlib"}));
}

Json Metric(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

Json ScoreJson(const chief::LoadedExport& loaded, const trainer::EvalResult& r) {
  const chief::ExportManifest& m = loaded.manifest;
  return {{"model", loaded.dir},
          {"job_id", m.job_id},
          {"step", m.step},
          {"examples", r.examples},
          {"auc", Metric(r.auc)},
          {"logloss", Metric(r.logloss)},
          {"accuracy", Metric(r.accuracy)},
          {"calibration", Metric(r.calibration)},
          {"mean_loss", Metric(r.mean_loss)},
          {"recorded_auc", m.eval.has_value() ? Metric(m.eval->auc) : Json(nullptr)}};
}

// Prints `st` for `command` and returns the exit code.
int Fail(const std::string& command, const absl::Status& st, int code) {
  std::cerr << "brook " << command << ": " << st.message() << "\n";
  return code;
}

struct PredictFlags {
  std::string model;
  std::vector<std::string> data;
  std::string output;
  std::string id_feature;
  std::string compression;  // "": the export's job spec
};

int RunPredict(const PredictFlags& f) {
  // Flags first: a bad one costs no restore and writes nothing.
  if (!f.id_feature.empty() && f.output.empty()) {
    return Fail(
        "predict",
        absl::InvalidArgumentError("--id-feature needs --output (the ids go beside the scores)"),
        kExitUsage);
  }
  if (!f.output.empty()) {
    absl::StatusOr<chief::ScoreFileType> type = chief::ScoreFileTypeFromPath(f.output);
    if (!type.ok()) return Fail("predict", type.status(), kExitUsage);
  }
  absl::StatusOr<chief::LoadedExport> loaded = chief::ReadExport(f.model);
  if (!loaded.ok()) return Fail("predict", loaded.status(), kExitUsage);
  absl::StatusOr<std::vector<std::string>> files = DataFiles(f.data, *loaded);
  if (!files.ok()) return Fail("predict", files.status(), kExitUsage);
  if (absl::Status st = PrepareData("predict", f.compression, *files, &*loaded); !st.ok())
    return Fail("predict", st, kExitUsage);
  chief::ScoreOptions options;
  std::unique_ptr<chief::ScoreWriter> writer;
  if (!f.output.empty()) {
    absl::StatusOr<std::unique_ptr<chief::ScoreWriter>> opened =
        chief::ScoreWriter::Open(f.output, f.id_feature);
    if (!opened.ok()) return Fail("predict", opened.status(), kExitUsage);
    writer = std::move(*opened);
    options.id_feature = f.id_feature;
    options.on_example = [&writer](float label, float score, const tf::Feature* id) {
      return writer->Write(label, score, id);
    };
  }
  absl::StatusOr<trainer::EvalResult> r = chief::ScoreExport(*loaded, *files, options);
  if (!r.ok()) return Fail("predict", r.status(), kExitFailed);
  Json out = ScoreJson(*loaded, *r);
  if (writer != nullptr) {
    if (absl::Status st = writer->Finish(); !st.ok()) return Fail("predict", st, kExitFailed);
    out["output"] = f.output;
    out["rows"] = writer->rows();
  }
  std::cout << out.dump() << std::endl;
  return kExitOk;
}

struct EvalFlags {
  std::string model, baseline;
  std::vector<std::string> data;
  std::string metric = "auc";
  double margin = 0.005;
  std::string compression;  // "": each export's job spec
};

int RunEval(const EvalFlags& f) {
  absl::StatusOr<chief::LoadedExport> model = chief::ReadExport(f.model);
  if (!model.ok()) return Fail("eval", model.status(), kExitUsage);
  absl::StatusOr<chief::LoadedExport> baseline = chief::ReadExport(f.baseline);
  if (!baseline.ok()) return Fail("eval", baseline.status(), kExitUsage);
  absl::StatusOr<std::vector<std::string>> files = DataFiles(f.data, *model);
  if (!files.ok()) return Fail("eval", files.status(), kExitUsage);
  for (chief::LoadedExport* e : {&*model, &*baseline}) {
    if (absl::Status st = PrepareData("eval", f.compression, *files, e); !st.ok())
      return Fail("eval", st, kExitUsage);
  }
  absl::StatusOr<trainer::EvalResult> m = chief::ScoreExport(*model, *files);
  if (!m.ok()) return Fail("eval", m.status(), kExitFailed);
  absl::StatusOr<trainer::EvalResult> b = chief::ScoreExport(*baseline, *files);
  if (!b.ok()) return Fail("eval", b.status(), kExitFailed);

  const bool use_auc = f.metric == "auc";
  const double mv = use_auc ? m->auc : m->logloss;
  const double bv = use_auc ? b->auc : b->logloss;
  if (!std::isfinite(mv) || !std::isfinite(bv)) {
    return Fail("eval",
                absl::FailedPreconditionError(absl::StrCat("no ", f.metric, " to compare (model ",
                                                           mv, ", baseline ", bv, ")")),
                kExitFailed);
  }
  // Positive: the model is worse by that much.
  const double regression = use_auc ? bv - mv : mv - bv;
  const bool worse = regression > f.margin;
  const Json out = {
      {"metric", f.metric},
      {"margin", f.margin},
      {"model", ScoreJson(*model, *m)},
      {"baseline", ScoreJson(*baseline, *b)},
      {"difference",
       {{"auc", Metric(m->auc - b->auc)}, {"logloss", Metric(m->logloss - b->logloss)}}},
      {"verdict", worse ? "worse" : "ok"}};
  std::cout << out.dump() << std::endl;
  if (worse) {
    std::cerr << absl::StrFormat(
        "brook eval: model is worse than the "
        "baseline: %s %.6f vs %.6f (margin %g)\n",
        f.metric, mv, bv, f.margin);
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

void RegisterPredict(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<PredictFlags>();
  CLI::App* cmd = app.add_subcommand("predict", "Score a model export on TFRecord data");
  cmd->add_option("--model", f->model, "Export directory (written by the chief)")->required();
  cmd->add_option("--data", f->data,
                  "TFRecord files or globs (default: the eval files the export "
                  "recorded)")
      ->expected(1, -1);
  cmd->add_option("--output", f->output,
                  "Also write each example's label and score here; the "
                  "extension picks the format: .csv (with a header), "
                  ".tfrecord/.tfrecords (tf.train.Example with float score "
                  "and label; .tfrecord.gz: GZIP)");
  cmd->add_option("--id-feature", f->id_feature,
                  "A feature of each record (one value: bytes, int64 or "
                  "float) copied beside its score in --output, e.g. an "
                  "example id");
  AddCompressionFlag(cmd, &f->compression);
  cmd->callback([f, exit_code] { *exit_code = RunPredict(*f); });
}

void RegisterEval(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<EvalFlags>();
  CLI::App* cmd = app.add_subcommand("eval",
                                     "Compare a model export with a baseline "
                                     "export on the same data; exit 1 if worse");
  cmd->add_option("--model", f->model, "Export directory of the candidate model")->required();
  cmd->add_option("--baseline", f->baseline, "Export directory of the baseline model")->required();
  cmd->add_option("--data", f->data,
                  "TFRecord files or globs (default: the eval files --model recorded)")
      ->expected(1, -1);
  cmd->add_option("--metric", f->metric, "What decides: auc (higher is better) or logloss")
      ->check(CLI::IsMember({"auc", "logloss"}))
      ->capture_default_str();
  cmd->add_option("--margin", f->margin,
                  "How much worse the model may be before it fails (absolute, "
                  "in the metric)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  AddCompressionFlag(cmd, &f->compression);
  cmd->callback([f, exit_code] { *exit_code = RunEval(*f); });
}

}  // namespace brook::cli
