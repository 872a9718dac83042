#include "chief/client/job_format.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace brook::chief {
namespace {

absl::Time FromMicros(int64_t us) { return absl::FromUnixMicros(us); }

std::string Percent(double fraction) {
  return absl::StrFormat("%.1f%%", 100 * std::clamp(fraction, 0.0, 1.0));
}

std::string Epoch(const v1::JobStatus& job) {
  if (job.epochs() > 0) {
    const int64_t shown = std::min<int64_t>(job.epoch() + 1, job.epochs());
    return absl::StrCat("epoch ", shown, "/", job.epochs());
  }
  return absl::StrCat("epoch ", job.epoch() + 1);
}

std::string Metric(double v) {
  return v == 0 || !std::isfinite(v) ? "-" : absl::StrFormat("%.4f", v);
}

// How long the job has run (or ran, or waited).
std::string Age(const v1::JobStatus& job, absl::Time now) {
  const absl::Time start = FromMicros(job.start_time_us());
  if (job.end_time_us() > 0) {
    const absl::Time from = job.start_time_us() > 0 ? start : FromMicros(job.submit_time_us());
    return absl::StrCat("after ", ShortDuration(FromMicros(job.end_time_us()) - from));
  }
  if (job.start_time_us() > 0) return absl::StrCat("for ", ShortDuration(now - start));
  if (job.submit_time_us() > 0) {
    return absl::StrCat("for ", ShortDuration(now - FromMicros(job.submit_time_us())));
  }
  return "";
}

using OrderedJson = nlohmann::ordered_json;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

OrderedJson MessageJson(const Message& m);

// Element `i` of repeated field `f`, or the singular field when i < 0.
OrderedJson FieldJson(const Message& m, const FieldDescriptor* f, int i) {
  const Reflection* r = m.GetReflection();
  const bool rep = i >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, i) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, i) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const double v = f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE
                           ? (rep ? r->GetRepeatedDouble(m, f, i) : r->GetDouble(m, f))
                           : (rep ? r->GetRepeatedFloat(m, f, i) : r->GetFloat(m, f));
      return std::isfinite(v) ? OrderedJson(v) : OrderedJson(nullptr);
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, i) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return std::string(rep ? r->GetRepeatedEnum(m, f, i)->name() : r->GetEnum(m, f)->name());
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string v = rep ? r->GetRepeatedString(m, f, i) : r->GetString(m, f);
      return f->type() == FieldDescriptor::TYPE_BYTES ? absl::Base64Escape(v) : v;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageJson(rep ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f));
  }
  return nullptr;
}

OrderedJson MessageJson(const Message& m) {
  const Reflection* r = m.GetReflection();
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  OrderedJson out = OrderedJson::object();
  for (int k = 0; k < d->field_count(); ++k) {
    const FieldDescriptor* f = d->field(k);
    const std::string name(f->name());
    if (f->is_map()) {
      OrderedJson obj = OrderedJson::object();
      for (int i = 0; i < r->FieldSize(m, f); ++i) {
        const Message& entry = r->GetRepeatedMessage(m, f, i);
        const FieldDescriptor* key = entry.GetDescriptor()->map_key();
        const OrderedJson k_json = FieldJson(entry, key, -1);
        const std::string k_text = k_json.is_string() ? k_json.get<std::string>() : k_json.dump();
        obj[k_text] = FieldJson(entry, entry.GetDescriptor()->map_value(), -1);
      }
      out[name] = std::move(obj);
    } else if (f->is_repeated()) {
      OrderedJson arr = OrderedJson::array();
      for (int i = 0; i < r->FieldSize(m, f); ++i) arr.push_back(FieldJson(m, f, i));
      out[name] = std::move(arr);
    } else {
      out[name] = FieldJson(m, f, -1);
    }
  }
  return out;
}

}  // namespace

bool IsFinishedState(std::string_view state) {
  return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED";
}

std::string ShortDuration(absl::Duration d) {
  const int64_t s = std::max<int64_t>(0, absl::ToInt64Seconds(d));
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, (s % 86400) / 3600);
}

std::string FormatCount(double n) {
  if (!std::isfinite(n) || n < 0) return "-";
  if (n < 999.5) return absl::StrFormat("%.0f", n);
  static constexpr const char* kUnits[] = {"k", "M", "G", "T", "P"};
  double v = n;
  for (const char* unit : kUnits) {
    v /= 1000;
    if (v < 9.995) return absl::StrFormat("%.2f%s", v, unit);
    if (v < 99.95) return absl::StrFormat("%.1f%s", v, unit);
    if (v < 999.5) return absl::StrFormat("%.0f%s", v, unit);
  }
  return absl::StrFormat("%.0f%s", v * 1000, kUnits[4]);
}

std::optional<absl::Duration> EstimateEta(const v1::JobStatus& job, absl::Time now) {
  if (IsFinishedState(job.state()) || job.start_time_us() <= 0) return std::nullopt;
  const double p = job.progress();
  if (!std::isfinite(p) || p <= 0) return std::nullopt;
  if (p >= 1) return absl::ZeroDuration();
  const double rate = job.examples_per_second();
  if (rate > 0 && job.examples_trained() > 0) {
    const double left = static_cast<double>(job.examples_trained()) * (1 - p) / p;
    return absl::Seconds(left / rate);
  }
  const absl::Duration elapsed = now - FromMicros(job.start_time_us());
  if (elapsed <= absl::ZeroDuration()) return std::nullopt;
  return elapsed * ((1 - p) / p);
}

std::string ProgressLine(const v1::JobStatus& job, absl::Time now) {
  std::string state = job.state();
  if (job.finalizing() && !IsFinishedState(job.state())) absl::StrAppend(&state, " (finalizing)");
  if (job.state() == "QUEUED") {
    std::string line = absl::StrCat(state, " | waiting to start, priority ", job.priority());
    if (job.submit_time_us() > 0) {
      absl::StrAppend(&line, ", submitted ", ShortDuration(now - FromMicros(job.submit_time_us())),
                      " ago");
    }
    if (!job.message().empty()) absl::StrAppend(&line, " | ", job.message());
    return line;
  }
  std::string line =
      absl::StrCat(state, " ", Percent(job.progress()), " ", Epoch(job), " | ",
                   FormatCount(static_cast<double>(job.examples_trained())), " examples");
  if (!IsFinishedState(job.state())) {
    absl::StrAppend(&line, " ", FormatCount(job.examples_per_second()), "/s");
    const std::optional<absl::Duration> eta = EstimateEta(job, now);
    absl::StrAppend(&line, " ETA ", eta ? ShortDuration(*eta) : "-");
  }
  absl::StrAppend(&line, " | loss ", Metric(job.loss()), " AUC train ", Metric(job.train_auc()),
                  " eval ", Metric(job.eval().done() ? job.eval().auc() : 0), " | units ",
                  job.units_done(), " done ", job.units_leased(), " leased ", job.units_pending(),
                  " left");
  return line;
}

std::string JobSummary(const v1::JobStatus& job, absl::Time now) {
  std::string out = absl::StrCat("job ", job.id());
  if (!job.name().empty()) absl::StrAppend(&out, " (", job.name(), ")");
  absl::StrAppend(&out, ": ", job.state());
  if (job.finalizing() && !IsFinishedState(job.state())) absl::StrAppend(&out, " (finalizing)");
  if (const std::string age = Age(job, now); !age.empty()) absl::StrAppend(&out, " ", age);
  absl::StrAppend(&out, "\n");
  if (!job.message().empty()) absl::StrAppend(&out, "  message:    ", job.message(), "\n");
  absl::StrAppend(&out, "  progress:   ", Percent(job.progress()), ", ", Epoch(job), ", ",
                  FormatCount(static_cast<double>(job.examples_trained())), " examples");
  if (!IsFinishedState(job.state()) && job.examples_per_second() > 0) {
    absl::StrAppend(&out, " (", FormatCount(job.examples_per_second()), "/s)");
  }
  absl::StrAppend(&out, ", units ", job.units_done(), " done ", job.units_leased(), " leased ",
                  job.units_pending(), " left of ", job.units_total(), "\n");
  if (const std::optional<absl::Duration> eta = EstimateEta(job, now)) {
    absl::StrAppend(&out, "  eta:        ", ShortDuration(*eta), "\n");
  }
  absl::StrAppend(&out, "  training:   loss ", Metric(job.loss()), "\n");
  absl::StrAppend(&out, "  AUC:        ", AucLine(job), "\n");
  if (job.eval().done()) {
    const v1::ChiefEvalResult& e = job.eval();
    absl::StrAppend(&out, absl::StrFormat("  eval:       AUC %.4f, logloss %.4f, accuracy %.4f, "
                                          "calibration %.4f on %d examples (step %d)\n",
                                          e.auc(), e.logloss(), e.accuracy(), e.calibration(),
                                          e.examples(), e.step()));
  }
  if (job.skipped_corrupt_regions() + job.skipped_bad_examples() > 0) {
    absl::StrAppend(&out, "  skipped:    ", job.skipped_corrupt_regions(), " corrupt regions (",
                    job.skipped_corrupt_bytes(), " bytes), ", job.skipped_bad_examples(),
                    " records that do not parse (data.on_corrupt: skip; `brook logs` names "
                    "the files)\n");
  }
  if (!job.export_dir().empty()) absl::StrAppend(&out, "  export:     ", job.export_dir(), "\n");
  if (job.checkpoints_size() > 0) {
    const v1::ChiefCheckpoint& c = job.checkpoints(job.checkpoints_size() - 1);
    absl::StrAppend(&out, "  checkpoint: ", c.dir(), " (step ", c.step(), ")\n");
  }
  if (!IsFinishedState(job.state())) {
    absl::StrAppend(&out, "  trainers:   ", job.trainers_size(), " of ", job.trainers_wanted(),
                    job.trainers_size() > 0
                        ? absl::StrCat(": ", absl::StrJoin(job.trainers(), ", "))
                        : std::string(),
                    "\n");
  }
  return out;
}

std::string AucLine(const v1::JobStatus& job) {
  // The trainers' progressive AUC window (trainer.cc, kAucWindow): the last
  // one or two rolls of 64K examples of the trainer that reported last.
  std::string out = absl::StrCat("train ", Metric(job.train_auc()));
  if (job.train_auc() != 0) {
    absl::StrAppend(&out, job.examples_trained() < 65536 ? " (every example so far)"
                                                         : " (last 64K-128K examples)");
  }
  if (job.eval().done()) {
    absl::StrAppend(&out, "  eval ", Metric(job.eval().auc()), " (step ", job.eval().step(), ")");
  } else {
    absl::StrAppend(&out, "  eval - (not yet)");
  }
  return out;
}

std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows,
                        const std::vector<bool>& right_align) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const std::vector<std::string>& row : rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  auto add_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < row.size() ? row[c] : std::string();
      const std::string pad(width[c] - std::min(width[c], cell.size()), ' ');
      if (c > 0) line += "  ";
      const bool right = c < right_align.size() && right_align[c];
      line += right ? pad + cell : cell + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  add_row(header);
  for (const std::vector<std::string>& row : rows) add_row(row);
  return out;
}

std::string JobsTable(const google::protobuf::RepeatedPtrField<v1::JobStatus>& jobs,
                      absl::Time now) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::JobStatus& job : jobs) {
    std::string state = job.state();
    if (job.finalizing() && !IsFinishedState(state)) state = "FINALIZING";
    rows.push_back({job.id(), job.name(), state, absl::StrCat(job.priority()),
                    Percent(job.progress()),
                    FormatCount(static_cast<double>(job.examples_trained())),
                    Metric(job.train_auc()), Metric(job.eval().done() ? job.eval().auc() : 0),
                    job.submit_time_us() > 0 ? ShortDuration(now - FromMicros(job.submit_time_us()))
                                             : std::string("-")});
  }
  return RenderTable(
      {"ID", "NAME", "STATE", "PRIORITY", "PROGRESS", "EXAMPLES", "TRAIN AUC", "EVAL AUC", "AGE"},
      rows, {false, false, false, true, true, true, true, true, true});
}

std::string EventLog(const v1::JobStatus& job) {
  std::string out;
  if (job.events_dropped() > 0) {
    absl::StrAppend(&out, "(", job.events_dropped(), " older events dropped)\n");
  }
  for (const v1::ChiefJobEvent& e : job.events()) absl::StrAppend(&out, EventLine(e));
  return out;
}

NewEvents FollowEvents(const v1::JobStatus& job, uint64_t* seen) {
  NewEvents out;
  const uint64_t dropped = job.events_dropped();
  const uint64_t total = dropped + static_cast<uint64_t>(job.events_size());
  if (*seen < dropped) {
    out.missed = dropped - *seen;
    *seen = dropped;
  }
  // A chief that knows fewer events than were shown (none here: events are
  // kept with the job's state) shows nothing until it knows more.
  out.first = static_cast<int>(std::min(*seen, total) - dropped);
  *seen = std::max(*seen, total);
  return out;
}

std::string EventLine(const v1::ChiefJobEvent& e) {
  return absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", FromMicros(e.time_us()), absl::UTCTimeZone()), "  ",
      e.text(), "\n");
}

std::string ToJson(const google::protobuf::Message& message) {
  // Invalid UTF-8 in a string (a message quoting bad input) is replaced, not
  // thrown.
  return MessageJson(message).dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

}  // namespace brook::chief
