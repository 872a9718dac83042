#include "chief/service/chief_metrics.h"

#include <map>
#include <string>

#include "metrics/collector.h"

namespace brook::chief {

std::vector<prometheus::MetricFamily> CollectChiefMetrics(const ChiefStats& stats, absl::Time now) {
  metrics::FamilySet set;
  auto* jobs = set.Gauge("brook_chief_jobs", "Jobs by state");
  auto* units = set.Gauge("brook_chief_job_work_units",
                          "Work units of the current data epoch, by job and state");
  auto* examples = set.Counter("brook_chief_job_examples_total",
                               "Examples committed by the job's trainers, all epochs");
  auto* releases = set.Counter("brook_chief_job_work_unit_releases_total",
                               "Work units taken back unfinished (trainer expiry or leave)");
  auto* expired = set.Counter("brook_chief_job_expired_trainers_total",
                              "Trainers dropped for missing heartbeats");
  auto* trainers = set.Gauge("brook_chief_job_trainers", "Trainers assigned to the job");
  auto* eval_auc = set.Gauge("brook_chief_job_eval_auc", "AUC of the job's last evaluation");
  auto* checkpoints =
      set.Counter("brook_chief_job_checkpoints_total", "Checkpoints taken of the job");
  auto* skipped = set.Counter("brook_chief_job_skipped_records_total",
                              "Data skipped under data.on_corrupt: skip, by reason: corrupt "
                              "TFRecord regions, records that do not parse");
  auto* skipped_bytes = set.Counter("brook_chief_job_skipped_bytes_total",
                                    "Bytes of corrupt TFRecord regions skipped");
  auto* checkpoint_age =
      set.Gauge("brook_chief_job_checkpoint_age_seconds",
                "Seconds since the job's last checkpoint (running jobs that have one)");
  std::map<std::string, int> by_state;
  for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded, JobState::kFailed,
                     JobState::kCancelled}) {
    by_state[std::string(JobStateName(s))] = 0;
  }
  for (const JobInfo& info : stats.jobs) {
    ++by_state[std::string(JobStateName(info.state))];
    if (!info.progress.has_value()) continue;
    const metrics::Labels job = {{"job", info.id}};
    const WorkLeasesStats& p = *info.progress;
    set.Add(units, {{"job", info.id}, {"state", "done"}}, static_cast<double>(p.units_done));
    set.Add(units, {{"job", info.id}, {"state", "leased"}}, static_cast<double>(p.units_leased));
    set.Add(units, {{"job", info.id}, {"state", "pending"}}, static_cast<double>(p.units_pending));
    set.Add(examples, job, static_cast<double>(ExamplesTrained(info)));
    set.Add(skipped, {{"job", info.id}, {"reason", "corrupt_region"}},
            static_cast<double>(info.metrics.skipped_corrupt_regions));
    set.Add(skipped, {{"job", info.id}, {"reason", "bad_example"}},
            static_cast<double>(info.metrics.skipped_bad_examples));
    set.Add(skipped_bytes, job, static_cast<double>(info.metrics.skipped_corrupt_bytes));
    set.Add(releases, job, static_cast<double>(p.releases));
    set.Add(expired, job, static_cast<double>(p.expired_trainers));
    set.Add(trainers, job, static_cast<double>(info.trainers.size()));
    set.Add(checkpoints, job, static_cast<double>(info.checkpoints.size()));
    if (info.eval.done) set.Add(eval_auc, job, info.eval.auc);
    if (info.state == JobState::kRunning && !info.checkpoints.empty()) {
      set.Add(checkpoint_age, job, absl::ToDoubleSeconds(now - info.checkpoints.back().time));
    }
  }
  for (const auto& [state, n] : by_state) set.Add(jobs, {{"state", state}}, n);
  set.Add(
      set.Gauge("brook_chief_trainers", "Trainers registered and heartbeating, idle or assigned"),
      {}, static_cast<double>(stats.trainers));
  set.Add(set.Counter("brook_chief_missed_heartbeats_total",
                      "Trainers dropped for missing their heartbeats (their units are re-leased)"),
          {}, static_cast<double>(stats.expired_trainers));
  set.Add(set.Counter("brook_chief_state_save_errors_total",
                      "Failed writes of the job queue to the state store"),
          {}, static_cast<double>(stats.save_errors));
  set.Add(set.Counter("brook_chief_dropped_tables_total",
                      "Table parts (one per table per PS) of ended jobs dropped from the PS nodes"),
          {}, static_cast<double>(stats.tables_dropped));
  set.Add(
      set.Counter("brook_chief_tasks_failed_total", "Checkpoints and finalizations that failed"),
      {}, static_cast<double>(stats.tasks_failed));
  set.Add(set.Counter("brook_chief_fenced_ps_clients_total",
                      "PS client ids of expired (or re-registered) trainers fenced on every PS"),
          {}, static_cast<double>(stats.fenced_total));
  auto* sends = set.Counter("brook_chief_fence_sends_total",
                            "Sends of the fence list to the PS nodes, by result");
  set.Add(sends, {{"result", "ok"}},
          static_cast<double>(stats.fence_sends - stats.fence_send_errors));
  set.Add(sends, {{"result", "error"}}, static_cast<double>(stats.fence_send_errors));
  auto* restarts = set.Counter("brook_chief_ps_restarts_total",
                               "PS restarts the chief noticed (a new incarnation): rolled_back "
                               "false came back with its WAL (nothing acknowledged lost), true "
                               "went back to a checkpoint or to empty (the jobs' events say what)");
  set.Add(restarts, {{"rolled_back", "false"}},
          static_cast<double>(stats.ps_restarts - stats.ps_rollbacks));
  set.Add(restarts, {{"rolled_back", "true"}}, static_cast<double>(stats.ps_rollbacks));
  set.Add(set.Gauge("brook_chief_fence_pending",
                    "1 while a fence has not reached every PS yet (sent again every tick)"),
          {}, stats.fence_pending ? 1.0 : 0.0);
  return set.Take();
}

}  // namespace brook::chief
