// See cluster_service.h.
#include "control/cluster/cluster_service.h"

#include "control/log.h"
#include "limiter/calendar_window.h"
#include <thread>

namespace sluice::control {
namespace {

// The loader refused a policy with an endpoint that does not parse.
std::vector<RedisEndpoint> endpoints(const policy::ClusterSpec& spec) {
  std::vector<RedisEndpoint> out;
  std::string why;
  for (const std::string& text : spec.redis) {
    if (std::optional<RedisEndpoint> e = parse_redis_endpoint(text, why)) out.push_back(*e);
  }
  return out;
}

void raise_max(std::atomic<uint64_t>& max, uint64_t v) noexcept {
  uint64_t cur = max.load(std::memory_order_relaxed);
  while (v > cur && !max.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

ClusterService::ClusterService(Setup setup)
    : setup_(std::move(setup)),
      redis_(endpoints(setup_.spec), setup_.redis),
      gcra_(redis_),
      window_(redis_),
      sync_(*setup_.table, gcra_, window_, setup_.spec.key_prefix) {
  if (setup_.apply_change) {
    replica_ = std::make_unique<ClusterReplica>(redis_, setup_.spec.key_prefix, setup_.box,
                                                setup_.credential_fingerprint, setup_.apply_change);
  }
}

void ClusterService::publish(ReplicaChange change) {
  if (replica_) replica_->publish(std::move(change));
}

ClusterService::~ClusterService() = default;

uint64_t ClusterService::lost_records() const noexcept {
  uint64_t n = 0;
  for (const limiter::SpendLog* l : setup_.logs) n += l->lost_records();
  return n;
}

std::string ClusterService::last_error() const {
  std::lock_guard lock(error_mutex_);
  return last_error_;
}

// Every worker's log turned over at once, one grace period for all, then
// each retired half added into the watch.
void ClusterService::collect(limiter::Nanos box_now) {
  std::vector<unsigned> retired;
  retired.reserve(setup_.logs.size());
  for (limiter::SpendLog* l : setup_.logs) retired.push_back(l->flip());
  setup_.wait_for_readers();
  drained_.clear();
  for (size_t i = 0; i < setup_.logs.size(); ++i) setup_.logs[i]->drain(retired[i], drained_);
  {
    std::lock_guard lock(control_spends_mutex_);
    drained_.insert(drained_.end(), control_spends_.begin(), control_spends_.end());
    control_spends_.clear();
  }
  for (const KeySpend& s : drained_) add(s, box_now);
}

void ClusterService::record_tokens(const limiter::BucketKey& key, uint32_t minute, uint64_t tokens) {
  std::lock_guard lock(control_spends_mutex_);
  if (control_spends_.size() < kMaxWatched) control_spends_.push_back({key, 0, tokens, minute});
}

// A spend into the watch. A window's counts belong to one minute: a spend of
// a later one starts the key again, one of an earlier one (over) is dropped.
void ClusterService::add(const KeySpend& s, limiter::Nanos box_now) {
  if (!sync_.shared(s.key.bucket())) return;
  if (watched_.size() >= kMaxWatched && !watched_.contains(s.key)) {
    // Past the cap the spend still goes out, once (not retried, not handed
    // to the fallback); the key is not watched. No watched key's spend is
    // dropped to make room.
    unwatched_.push_back(s);
    return;
  }
  Watched& w = watched_[s.key];
  const auto sum = [](uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; };
  if (sync_.window(s.key.bucket()) && w.minute != s.minute) {
    if (s.minute < w.minute) return;
    // A window that ended while Redis was away: its counts are the past's,
    // no budget of a later window owes them.
    w.spent = 0;
    w.tokens = 0;
    w.shared = 0;
    w.shared_tokens = 0;
    w.minute = s.minute;
  }
  w.spent = sum(w.spent, s.spent);
  w.tokens = sum(w.tokens, s.tokens);
  w.last_spent = box_now;
}

bool ClusterService::step(Clock::time_point now) {
  const Clock::time_point began = Clock::now();
  sync_.set_buckets(setup_.bucket_names());
  const limiter::Nanos box_now = setup_.box_clock();
  collect(box_now);
  // Only what the box spent goes out: what the other boxes spent on a rate
  // key comes back with the box's own spends, or from the groups' change
  // logs (ClusterSync), so an idle rate key is never read. An idle window
  // is still read, at most kMaxIdleReads a sync, spread evenly over the
  // syncs by their hash: a crowd of distinct keys, each admitted once, costs
  // Redis an operation per admission and a bounded number of reads.
  size_t idle = 0;
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (!sync_.shared(it->first.bucket())) {
      it = watched_.erase(it);  // its bucket left the cluster (a reload)
      continue;
    }
    idle += it->second.spent == 0 && it->second.tokens == 0 && sync_.window(it->first.bucket());
    ++it;
  }
  const uint64_t period = std::max<uint64_t>(1, (idle + kMaxIdleReads - 1) / kMaxIdleReads);
  std::vector<KeySpend> batch;
  batch.reserve(watched_.size() - idle + std::min(idle, kMaxIdleReads + kMaxIdleReads / 4));

  for (const auto& [key, w] : watched_) {
    const bool spent = w.spent != 0 || w.tokens != 0;
    if (!spent && (!sync_.window(key.bucket()) || (sync_count_ + key.k0) % period != 0)) continue;
    // An idle window is read for the window now running.
    const auto running = static_cast<uint32_t>(sync_.calendar(key.bucket()).window_of(box_now));
    batch.push_back({key, w.spent, w.tokens, spent ? w.minute : running});
  }
  batch.insert(batch.end(), unwatched_.begin(), unwatched_.end());
  unwatched_.clear();
  ++sync_count_;
  const ClusterSync::Report report = sync_.sync(batch, box_now, now);
  settle(report, batch, box_now);
  counters_.syncs.fetch_add(1, std::memory_order_relaxed);
  counters_.keys_sent.fetch_add(report.sent, std::memory_order_relaxed);
  counters_.keys_published.fetch_add(report.published, std::memory_order_relaxed);
  counters_.keys_learned.fetch_add(report.learned, std::memory_order_relaxed);
  counters_.keys_reseeded.fetch_add(report.reseeded, std::memory_order_relaxed);
  counters_.round_trips.fetch_add(report.calls, std::memory_order_relaxed);
  counters_.keys_watched.store(watched_.size(), std::memory_order_relaxed);
  counters_.last_sync_keys.store(batch.size(), std::memory_order_relaxed);
  note_time(Clock::now() - began);
  // Runs and credentials after the budgets: they can wait, the budgets'
  // convergence cannot. Other boxes' changes are read every
  // kReplicaEvery-th sync (100 ms at 20 ms); this box's own go out at once.
  const bool polled = replica_ && (sync_count_ % kReplicaEvery == 1 || replica_->counters().queued.load() != 0);
  const bool replicated = !polled || replica_->poll(now);
  if (report.error == RedisError::kNone && replicated) {
    // A sync that reached Redis says it is back; one that had nothing to
    // ask it (no spend, no group due, no replication read) says nothing.
    if (report.calls == 0 && !polled && report.sent == 0) return counters_.in_fallback.load() == 0;
    leave_fallback();
    return true;
  }
  // Redis down shows as a failed sync even on a box with no cluster traffic
  // (the replication's read is its heartbeat), and a back-off names the
  // failure it follows, not only itself.
  counters_.sync_failures.fetch_add(1, std::memory_order_relaxed);
  std::string why = report.error != RedisError::kNone
                        ? std::string(to_string(report.error)) + ": " + report.detail
                        : "runs and credentials: " + replica_->last_error();
  if (why.find("backing_off") == std::string::npos) {
    last_failure_ = why;
  } else if (!last_failure_.empty()) {
    why += " (after " + last_failure_ + ")";
  }
  enter_fallback(why);
  return false;
}

// What went out is spent. What did not is tried once more at the next sync,
// then charged to the fallback's local share, and kept: it goes out with
// every sync until Redis takes it, so what this box admitted while cut off
// reaches the shared state and is repaid by every box (the others, not
// seeing it, handed out the whole budget meanwhile). Keys whose shared
// bucket is full again and that the box has left alone a while are no
// longer watched; a key that still owes Redis is kept.
void ClusterService::settle(const ClusterSync::Report& report, const std::vector<KeySpend>& sent,
                            limiter::Nanos box_now) {
  std::unordered_map<limiter::BucketKey, bool, KeyHash> failed;
  for (const KeySpend& s : report.unsent) failed.emplace(s.key, true);
  std::vector<KeySpend> to_fallback;
  for (const KeySpend& s : sent) {
    auto it = watched_.find(s.key);
    if (it == watched_.end()) continue;
    Watched& w = it->second;
    if (failed.contains(s.key)) {
      if (!w.retried) {
        w.retried = true;  // its spend stays, to go out with the next sync
        continue;
      }
      const limiter::Nanos fresh = w.spent - std::min(w.spent, w.shared);
      const uint64_t fresh_tokens = w.tokens - std::min(w.tokens, w.shared_tokens);
      if (fresh != 0 || fresh_tokens != 0) to_fallback.push_back({s.key, fresh, fresh_tokens, w.minute});
      w.shared = w.spent;
      w.shared_tokens = w.tokens;
      continue;
    }
    if (w.shared != 0 || w.shared_tokens != 0) counters_.repaid_keys.fetch_add(1, std::memory_order_relaxed);
    w.spent = 0;
    w.tokens = 0;
    w.shared = 0;
    w.shared_tokens = 0;
    w.retried = false;
    if (box_now - w.last_spent > kWatchFor) watched_.erase(it);
  }
  if (to_fallback.empty()) return;
  counters_.fallback_keys.fetch_add(to_fallback.size(), std::memory_order_relaxed);
  if (setup_.spec.fallback == policy::ClusterSpec::Fallback::kLocalShare && setup_.spec.boxes > 1) {
    (void)sync_.share_locally(to_fallback, setup_.spec.boxes - 1, box_now);
  }
}

void ClusterService::enter_fallback(const std::string& why) {
  {
    std::lock_guard lock(error_mutex_);
    last_error_ = why;
  }
  if (counters_.in_fallback.exchange(1, std::memory_order_relaxed) == 1) return;
  counters_.fallbacks.fetch_add(1, std::memory_order_relaxed);
  const char* mode = setup_.spec.fallback == policy::ClusterSpec::Fallback::kLocalShare ? "local-share" : "local-full";
  log(LogLevel::kWarning, LogEvent::kCluster,
      "cluster sync failed (" + why + "); cluster buckets fall back to " + mode);
}

void ClusterService::leave_fallback() {
  {
    std::lock_guard lock(error_mutex_);
    last_error_.clear();
  }
  if (counters_.in_fallback.exchange(0, std::memory_order_relaxed) == 0) return;
  log(LogLevel::kNotice, LogEvent::kCluster, "cluster sync works again; cluster buckets are shared");
}

void ClusterService::note_time(Clock::duration took) noexcept {
  const auto us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(took).count());
  counters_.last_sync_us.store(us, std::memory_order_relaxed);
  counters_.sync_us_total.fetch_add(us, std::memory_order_relaxed);
  raise_max(counters_.max_sync_us, us);
}

void ClusterService::serve(const std::atomic<bool>& stop) {
  const auto interval = std::chrono::nanoseconds(setup_.spec.sync_interval);
  Clock::time_point next = Clock::now();
  while (!stop.load(std::memory_order_relaxed)) {
    next += interval;
    (void)step(Clock::now());
    const Clock::time_point now = Clock::now();
    if (next < now) next = now;  // a slow sync: the next one starts at once, none is made up for
    // Slept in slices, so a stop is seen within 50 ms.
    while (!stop.load(std::memory_order_relaxed) && Clock::now() < next) {
      std::this_thread::sleep_for(std::min<Clock::duration>(next - Clock::now(), std::chrono::milliseconds(50)));
    }
  }
}

}  // namespace sluice::control
