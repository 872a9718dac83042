// A small trained model export for the serving tests: planted-signal data
// (an int64 id, a bytes tag list, a float), a wide & deep model trained
// against an in-process two-shard PS under a job prefix, then exported with
// chief/export exactly as a chief does. Header-only so brook_testing keeps
// its few dependencies; the tests that include it link the chief's.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "chief/export/model_export.h"
#include "chief/job/job_spec.h"
#include "common/status_macros.h"
#include "datatools/example_builder.h"
#include "ps/client/local_ps_client.h"
#include "ps/client/prefixed_ps_client.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "trainer/backend/cpu_backend.h"
#include "trainer/input/pipeline.h"
#include "trainer/trainer.h"

namespace brook::testing {

// Label = 1 with probability sigmoid(w[id] + v[tag] + 0.8 x).
inline absl::Status WriteServingData(const std::string& path, uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::mt19937_64 wrng(5);  // the same ground truth in every file
  std::normal_distribution<float> normal;
  std::vector<float> w(50), v(8);
  for (float& x : w) x = normal(wrng) * 1.5f;
  for (float& x : v) x = normal(wrng);
  const char* tags[] = {"red", "green", "blue", "cyan", "magenta", "yellow", "black", "white"};
  ASSIGN_OR_RETURN(std::unique_ptr<storage::TFRecordWriter> writer,
                   storage::TFRecordWriter::Open(path, {}));
  datatools::ExampleBuilder b;
  for (int i = 0; i < n; ++i) {
    const int64_t id = static_cast<int64_t>(rng() % w.size());
    const size_t tag = rng() % v.size();
    const float x = normal(rng);
    const float p = 1.0f / (1.0f + std::exp(-(w[static_cast<size_t>(id)] + v[tag] + 0.8f * x)));
    const float label = std::uniform_real_distribution<float>(0, 1)(rng) < p ? 1.0f : 0.0f;
    const std::string_view tag_view(tags[tag]);
    b.Clear();
    b.AddFloats("label", std::span<const float>(&label, 1));
    b.AddInt64s("c", std::span<const int64_t>(&id, 1));
    b.AddBytes("tag", std::span<const std::string_view>(&tag_view, 1));
    b.AddFloats("x", std::span<const float>(&x, 1));
    RETURN_IF_ERROR(writer->Write(b.Serialize()));
  }
  return writer->Close();
}

inline std::string ServingSpecYaml(const std::string& data_dir, int epochs) {
  return absl::StrReplaceAll(R"(name: serving-test
data: {train: [DIR/train.tfrecord], eval: [DIR/eval.tfrecord]}
features:
  label: {name: label, type: float}
  features:
    - {name: c, type: int64, kind: varlen}
    - {name: tag, type: bytes, kind: varlen}
    - {name: x, type: float, length: 1}
model: {type: wide_deep, embedding_dim: 4, hidden: [8]}
sparse:
  - {feature: c}
  - {feature: tag}
dense:
  - {feature: x, transform: standardize, mean: 0, stddev: 1}
optimizer:
  embedding: {type: adagrad, learning_rate: 0.1}
  dense: {type: adam, learning_rate: 0.01}
training: {batch_size: 64, epochs: EPOCHS, staleness: 0, shuffle_buffer: 0}
)",
                             {{"DIR", data_dir}, {"EPOCHS", std::to_string(epochs)}});
}

// data_dir/{train,eval}.tfrecord, written once.
inline absl::Status EnsureServingData(const std::string& data_dir) {
  namespace fs = std::filesystem;
  if (fs::exists(fs::path(data_dir) / "eval.tfrecord")) return absl::OkStatus();
  fs::create_directories(data_dir);
  RETURN_IF_ERROR(WriteServingData((fs::path(data_dir) / "train.tfrecord").string(), 1, 3000));
  return WriteServingData((fs::path(data_dir) / "eval.tfrecord").string(), 3, 500);
}

// A trainer of the serving test model on `job_ps` (a job's view: a
// PrefixedPsClient), its tables declared; Train() runs one epoch of
// data_dir's training data.
class ServingTrainer {
 public:
  static absl::StatusOr<std::unique_ptr<ServingTrainer>> Create(ps::PsClient* job_ps,
                                                                const std::string& data_dir) {
    RETURN_IF_ERROR(EnsureServingData(data_dir));
    auto t = std::unique_ptr<ServingTrainer>(new ServingTrainer());
    t->data_dir_ = data_dir;
    ASSIGN_OR_RETURN(t->spec_, chief::JobSpec::FromYaml(ServingSpecYaml(data_dir, 1), ""));
    ASSIGN_OR_RETURN(t->backend_, trainer::CreateCpuBackend({.num_threads = 1}));
    ASSIGN_OR_RETURN(t->trainer_,
                     trainer::Trainer::Create(job_ps, t->spec_.model, t->spec_.features,
                                              t->spec_.ToTrainerOptions(), t->backend_.get()));
    RETURN_IF_ERROR(t->trainer_->Setup());
    return t;
  }
  absl::Status Train() {
    input::PipelineOptions po;
    po.files = {data_dir_ + "/train.tfrecord"};
    po.batch_size = spec_.training.batch_size;
    ASSIGN_OR_RETURN(std::unique_ptr<input::Pipeline> p,
                     input::Pipeline::Create(spec_.features, po));
    return trainer_->Train(p.get());
  }
  // Writes the export of what `whole_ps` (every shard, no prefix) holds.
  // `table_prefix`: where the job's tables are on the PS (a chief's jobs:
  // "<job id>/"; a standalone trainer's: "").
  absl::Status Export(ps::PsClient* whole_ps, const std::string& out_dir, const std::string& job_id,
                      std::optional<std::string> table_prefix = {}) {
    chief::ExportRequest r;
    r.dir = out_dir;
    r.job_id = job_id;
    r.table_prefix = table_prefix.value_or(job_id + "/");
    r.step = trainer_->stats().steps;
    r.train_files = {data_dir_ + "/train.tfrecord"};
    r.eval_files = {data_dir_ + "/eval.tfrecord"};
    return chief::WriteExport(whole_ps, spec_, r).status();
  }
  const chief::JobSpec& spec() const { return spec_; }

 private:
  ServingTrainer() = default;
  std::string data_dir_;
  chief::JobSpec spec_;
  std::unique_ptr<trainer::Backend> backend_;
  std::unique_ptr<trainer::Trainer> trainer_;
};

// Trains `epochs` epochs on data_dir's data against an in-process two-shard
// PS and writes the export to out_dir (job `job_id`, tables under
// "<job_id>/").
inline absl::Status TrainAndExport(const std::string& data_dir, const std::string& out_dir,
                                   int epochs = 1, const std::string& job_id = "job-1") {
  ps::LocalPsCluster cluster(2);
  ps::PrefixedPsClient job(cluster.client.get(), job_id + "/");
  ASSIGN_OR_RETURN(std::unique_ptr<ServingTrainer> t, ServingTrainer::Create(&job, data_dir));
  for (int e = 0; e < epochs; ++e) RETURN_IF_ERROR(t->Train());
  return t->Export(cluster.client.get(), out_dir, job_id);
}

// The first `max` records of a TFRecord file (empty on an error).
inline std::vector<std::string> ReadRecords(const std::string& path,
                                            size_t max = static_cast<size_t>(-1)) {
  std::vector<std::string> out;
  auto r = storage::TFRecordReader::Open(path, {});
  if (!r.ok()) return out;
  std::string_view rec;
  while (out.size() < max) {
    absl::StatusOr<bool> more = (*r)->Next(&rec);
    if (!more.ok() || !*more) break;
    out.emplace_back(rec);
  }
  return out;
}

// Options that collect each scored example's score into *scores (the
// first `max`), on one backend thread as `brook predict` runs in tests.
inline chief::ScoreOptions CollectScores(std::vector<float>* scores, size_t max) {
  chief::ScoreOptions o;
  o.num_threads = 1;
  o.on_example = [scores, max](float, float score, const tf::Feature*) {
    if (scores->size() < max) scores->push_back(score);
    return absl::OkStatus();
  };
  return o;
}

// `brook predict`'s score of each of the first `max` records of `file`:
// over a live PS (ScoreModel on the job's view), or of an export
// (ScoreExport). Empty on an error.
inline std::vector<float> ScoresOnPs(ps::PsClient* job_ps, const chief::JobSpec& spec,
                                     const std::string& file,
                                     size_t max = static_cast<size_t>(-1)) {
  std::vector<float> scores;
  if (!chief::ScoreModel(job_ps, spec, {file}, CollectScores(&scores, max)).ok()) scores.clear();
  return scores;
}
inline std::vector<float> ScoresOfExport(const std::string& dir, const std::string& file,
                                         size_t max = static_cast<size_t>(-1)) {
  std::vector<float> scores;
  if (!chief::ScoreExport(dir, {file}, CollectScores(&scores, max)).ok()) scores.clear();
  return scores;
}

// The largest |a[i] - b[i]|; infinity when the sizes differ.
inline double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return d;
}

// A tf.train.Example as a TF Serving instance, as a client writes it: each
// feature but the label as a list of its values.
inline nlohmann::json InstanceJson(const tf::Example& ex) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, f] : ex.features().feature()) {
    if (name == "label") continue;
    nlohmann::json values = nlohmann::json::array();
    for (int64_t v : f.int64_list().value()) values.push_back(v);
    for (float v : f.float_list().value()) values.push_back(v);
    for (const std::string& v : f.bytes_list().value()) values.push_back(v);
    j[name] = values;
  }
  return j;
}

}  // namespace brook::testing
