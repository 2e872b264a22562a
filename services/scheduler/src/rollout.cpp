#include "flotilla/scheduler/rollout.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include "flotilla/model/targeting.h"

namespace flotilla::scheduler {

namespace {

constexpr model::IntOrPercent kAll{.value = 100, .percent = true};
constexpr model::IntOrPercent kAutoPartitionSize{.value = 25, .percent = true};
constexpr model::IntOrPercent kNoPartitions{.value = 0, .percent = false};
constexpr size_t kNamedAtMost = 10;

struct Group {
  std::string name;
  int64_t max_unavailable = 0;
  std::vector<RolloutTarget*> targets;
};

bool upToDate(const RolloutTarget& t) {
  return !t.released.empty() && t.released == t.wanted && t.available;
}

//! Counted against a budget: released and not available (a cluster that never received the bundle is not).
bool unavailable(const RolloutTarget& t) {
  return !t.released.empty() && !t.available;
}

model::Matcher matcherOf(const model::Partition& p) {
  model::Matcher m;
  m.name = p.name;
  m.cluster_name = p.cluster_name;
  m.cluster_selector = p.cluster_selector;
  m.cluster_group = p.cluster_group;
  m.cluster_group_selector = p.cluster_group_selector;
  return m;
}

std::vector<Group> manualPartitions(const model::RolloutStrategy& rollout, std::vector<RolloutTarget>& targets,
                                    std::vector<std::string>& outside) {
  std::vector<Group> groups;
  std::vector<model::Matcher> matchers;
  for (const auto& p : rollout.partitions) {
    groups.push_back(Group{.name = p.name});
    matchers.push_back(matcherOf(p));
  }
  for (auto& t : targets) {
    bool placed = false;
    for (size_t i = 0; i < matchers.size() && !placed; ++i) {
      if (model::matches(matchers[i], t.facts)) {
        groups[i].targets.push_back(&t);
        placed = true;
      }
    }
    if (!placed) {
      outside.push_back(t.cluster);
    }
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    groups[i].max_unavailable = rolloutLimit(static_cast<int64_t>(groups[i].targets.size()),
                                             rollout.partitions[i].max_unavailable, rollout.max_unavailable, kAll);
  }
  return groups;
}

std::vector<Group> autoPartitions(const model::RolloutStrategy& rollout, std::vector<RolloutTarget>& targets) {
  const auto n = static_cast<int64_t>(targets.size());
  const bool disabled =
      rollout.auto_partition_size && !rollout.auto_partition_size->percent && rollout.auto_partition_size->value <= 0;
  const int64_t threshold = rollout.auto_partition_threshold.value_or(kDefaultAutoPartitionThreshold);
  int64_t size = n;
  if (!disabled && n >= threshold) {
    size = std::max<int64_t>(1, rolloutLimit(n, rollout.auto_partition_size, std::nullopt, kAutoPartitionSize));
  }
  std::vector<Group> groups;
  if (size >= n) {
    groups.push_back(Group{.name = "All"});
    for (auto& t : targets) {
      groups.back().targets.push_back(&t);
    }
  } else {
    for (int64_t from = 0; from < n; from += size) {
      const int64_t to = std::min(n, from + size);
      groups.push_back(Group{.name = "Partition " + std::to_string(from) + " - " + std::to_string(to)});
      for (int64_t i = from; i < to; ++i) {
        groups.back().targets.push_back(&targets[static_cast<size_t>(i)]);
      }
    }
  }
  for (auto& g : groups) {
    g.max_unavailable =
        rolloutLimit(static_cast<int64_t>(g.targets.size()), rollout.max_unavailable, std::nullopt, kAll);
  }
  return groups;
}

int64_t countIf(const std::vector<RolloutTarget*>& targets, bool (*pred)(const RolloutTarget&)) {
  return static_cast<int64_t>(
      std::count_if(targets.begin(), targets.end(), [&](const RolloutTarget* t) { return pred(*t); }));
}

bool notUpToDate(const RolloutTarget& t) {
  return !upToDate(t);
}

}  // namespace

int64_t rolloutLimit(int64_t count, const std::optional<model::IntOrPercent>& value,
                     const std::optional<model::IntOrPercent>& fallback, model::IntOrPercent def) {
  if (count <= 0) {
    return 1;
  }
  const model::IntOrPercent chosen = value ? *value : (fallback ? *fallback : def);
  if (!chosen.percent) {
    return chosen.value;
  }
  if (chosen.value <= 0) {
    return 1;
  }
  return std::max<int64_t>(1, count * chosen.value / 100);
}

namespace {

//! One pass over the partitions (the file comment of rollout.h): releases, then the status.
class Pass {
 public:
  Pass(const model::RolloutStrategy& rollout, std::vector<RolloutTarget>& targets, std::vector<Group>& groups)
      : targets_(targets), groups_(groups) {
    events::RolloutStatus& status = plan_.status;
    const auto n = static_cast<int64_t>(targets.size());
    status.max_unavailable = rolloutLimit(n, rollout.max_unavailable, std::nullopt, kAll);
    status.max_unavailable_partitions = rolloutLimit(static_cast<int64_t>(groups.size()),
                                                     rollout.max_unavailable_partitions, std::nullopt, kNoPartitions);
    status.max_new = rollout.max_new.value_or(kDefaultMaxNew);
    for (const auto& t : targets) {
      status.unavailable += unavailable(t) ? 1 : 0;
    }
  }

  //! Walks the passes: each round releases the next maxNew batch, while one asks for another and rounds are left.
  void walkRounds(size_t max_rounds) {
    for (size_t round = 0; round < std::max<size_t>(1, max_rounds); ++round) {
      plan_.rounds.emplace_back();
      plan_.another_pass = false;
      plan_.status.unavailable_partitions = 0;
      released_new_ = 0;
      held_back_ = false;
      reached_ = 0;
      stopped_at_.reset();
      walk();
      if (!plan_.another_pass) {
        return;
      }
    }
  }

  //! Walks the partitions in order until more are unavailable than maxUnavailablePartitions allows.
  void walk() {
    events::RolloutStatus& status = plan_.status;
    for (size_t i = 0; i < groups_.size(); ++i) {
      reached_ = i + 1;
      releaseIn(groups_[i]);
      if (countIf(groups_[i].targets, notUpToDate) > groups_[i].max_unavailable) {
        ++status.unavailable_partitions;
      }
      if (status.unavailable_partitions > status.max_unavailable_partitions) {
        stopped_at_ = i;
        return;
      }
    }
  }

  //! The status: each partition's progress, what is held, the rollout's state and who halts it.
  RolloutPlan finish(const std::vector<std::string>& outside) {
    events::RolloutStatus& status = plan_.status;
    for (size_t i = 0; i < groups_.size(); ++i) {
      status.partitions.push_back(describe(i));
    }
    if (stopped_at_) {
      status.partition = groups_[*stopped_at_].name;
    }
    status.outside_partitions_count = static_cast<int64_t>(outside.size());
    for (size_t i = 0; i < outside.size() && i < kNamedAtMost; ++i) {
      status.outside_partitions.push_back(outside[i]);
    }
    for (const auto& t : targets_) {
      if (!t.released.empty() && t.released == t.wanted) {
        plan_.release.insert(t.cluster);  // outside the partitions, running it already
      }
    }
    for (const auto& t : targets_) {
      status.held += plan_.release.contains(t.cluster) ? 0 : 1;
    }
    const bool holding = held_back_ || stopped_at_.has_value();
    if (status.held == 0) {
      status.state = "Released";
    } else if (holding && !failing_.empty()) {
      status.state = "Halted";
      for (size_t i = 0; i < failing_.size() && i < kNamedAtMost; ++i) {
        status.halted_by.push_back(
            {.cluster = failing_[i]->cluster, .state = failing_[i]->state, .message = failing_[i]->message});
      }
    } else {
      status.state = "Progressing";
    }
    return std::move(plan_);
  }

 private:
  void releaseIn(Group& group) {
    events::RolloutStatus& status = plan_.status;
    int64_t group_unavailable = countIf(group.targets, unavailable);
    for (RolloutTarget* t : group.targets) {
      if (!t->released.empty() && t->released == t->wanted) {
        plan_.release.insert(t->cluster);
        continue;
      }
      if (t->paused) {
        continue;  // placement stages it as paused
      }
      if (t->released.empty()) {
        if (released_new_ >= status.max_new) {
          // Another pass, once this one released a batch (with maxNew 0 nothing new ever goes: no pass loop).
          plan_.another_pass = released_new_ > 0;
          held_back_ = true;
          continue;
        }
        ++released_new_;
      } else if (t->available) {
        if (status.unavailable >= status.max_unavailable || group_unavailable >= group.max_unavailable) {
          held_back_ = true;
          continue;
        }
        ++status.unavailable;  // an update makes an available cluster unavailable until it reports
        ++group_unavailable;
      }
      plan_.release.insert(t->cluster);
      plan_.rounds.back().push_back(t->cluster);
      t->released = t->wanted;
      t->available = false;
    }
  }

  events::RolloutPartitionStatus describe(size_t i) {
    const Group& group = groups_[i];
    events::RolloutPartitionStatus p{.name = group.name,
                                     .count = static_cast<int64_t>(group.targets.size()),
                                     .max_unavailable = group.max_unavailable,
                                     .unavailable = countIf(group.targets, notUpToDate)};
    bool group_failing = false;
    for (const RolloutTarget* t : group.targets) {
      if (i < reached_ && t->failing && !upToDate(*t)) {
        group_failing = true;
        failing_.push_back(t);
      }
    }
    if (i >= reached_) {
      p.state = "Waiting";
    } else if (p.unavailable == 0) {
      p.state = "Ready";
    } else if (p.unavailable > p.max_unavailable && group_failing) {
      p.state = "Halted";
    } else {
      p.state = "Rolling";
    }
    if (plan_.status.partition.empty() && p.unavailable > 0) {
      plan_.status.partition = p.name;
    }
    return p;
  }

  std::vector<RolloutTarget>& targets_;
  std::vector<Group>& groups_;
  RolloutPlan plan_;
  int64_t released_new_ = 0;
  bool held_back_ = false;  //!< a deployment this pass could have released but did not
  size_t reached_ = 0;      //!< partitions the pass walked
  std::optional<size_t> stopped_at_;
  std::vector<const RolloutTarget*> failing_;
};

}  // namespace

RolloutPlan planRollout(const std::optional<model::RolloutStrategy>& strategy, std::vector<RolloutTarget> targets,
                        size_t max_rounds) {
  const model::RolloutStrategy rollout = strategy.value_or(model::RolloutStrategy{});
  std::sort(targets.begin(), targets.end(), [](const auto& a, const auto& b) { return a.cluster < b.cluster; });
  std::vector<std::string> outside;
  std::vector<Group> groups =
      rollout.partitions.empty() ? autoPartitions(rollout, targets) : manualPartitions(rollout, targets, outside);
  Pass pass(rollout, targets, groups);
  pass.walkRounds(max_rounds);
  return pass.finish(outside);
}

}  // namespace flotilla::scheduler
