// A deterministic share of a run's work (`scorer run --shard I/N`), so that
// N hosts, each run by the cluster's own scheduler, score one run between
// them; `scorer merge` (merge.h) joins their files. The unit of work is one
// (shape, replicate): a shape's replicates may land on different hosts, and
// each replicate's paired trials stay in one process on one GPU.
#pragma once

#include <string>
#include <vector>

#include "scorer/replicates.h"

namespace scorer {

struct ShardSpec {
  int index = 0;  // 1..count; 0: the whole run
  int count = 0;
};

constexpr int kMaxShards = 10000;

// "I/N" with 1 <= I <= N <= kMaxShards. Throws std::invalid_argument with
// the reason (the caller names the option).
ShardSpec parse_shard(const std::string& v);

// results/shard-I-of-N.json
std::string default_shard_path(const ShardSpec& s);

// The shard (1..count) of each item of `work`, in the list's order: each item
// goes to the shard with the least estimated time so far (`seconds` per
// shape, dispatch.h), the lower index on a tie. Every item is in exactly one
// shard; the same list, estimates and count give the same answer on every
// host.
std::vector<int> assign_shards(const std::vector<WorkItem>& work, const std::vector<double>& seconds, int count);

// The items of `work` that shard `s` scores, in the list's order (all of
// them for the whole run).
std::vector<WorkItem> shard_work(const std::vector<WorkItem>& work, const std::vector<double>& seconds,
                                 const ShardSpec& s);

// What a shard's file records of its share: every shape of the whole run,
// and each of its units with the facts its replicate was scored with (from
// `items`, each shape's scored items; a unit with none was skipped).
ShardInfo describe_shard(const ShardSpec& s, const std::vector<Shape>& shapes, const std::vector<WorkItem>& share,
                         const std::vector<std::vector<ShapeResult>>& items);

}  // namespace scorer
