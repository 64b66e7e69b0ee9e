#include "scorer/shard.h"

#include <stdexcept>

namespace scorer {

ShardSpec parse_shard(const std::string& v) {
  const size_t slash = v.find('/');
  auto whole = [&](const std::string& t) {
    if (t.empty() || t.size() > 5 || t.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("expected I/N (shard I of N, 1 <= I <= N), got '" + v + "'");
    return std::stoi(t);
  };
  if (slash == std::string::npos) whole("");
  ShardSpec s{whole(v.substr(0, slash)), whole(v.substr(slash + 1))};
  if (s.count < 1 || s.count > kMaxShards)
    throw std::invalid_argument("N must be 1 to " + std::to_string(kMaxShards) + ", got '" + v + "'");
  if (s.index < 1 || s.index > s.count) throw std::invalid_argument("I must be 1 to N, got '" + v + "'");
  return s;
}

std::string default_shard_path(const ShardSpec& s) {
  return "results/shard-" + std::to_string(s.index) + "-of-" + std::to_string(s.count) + ".json";
}

std::vector<int> assign_shards(const std::vector<WorkItem>& work, const std::vector<double>& seconds, int count) {
  std::vector<double> load(size_t(count), 0);
  std::vector<int> out;
  out.reserve(work.size());
  for (const WorkItem& w : work) {
    size_t best = 0;
    for (size_t k = 1; k < load.size(); ++k)
      if (load[k] < load[best]) best = k;
    load[best] += seconds.at(w.shape);
    out.push_back(int(best) + 1);
  }
  return out;
}

std::vector<WorkItem> shard_work(const std::vector<WorkItem>& work, const std::vector<double>& seconds,
                                 const ShardSpec& s) {
  if (s.index == 0) return work;
  const std::vector<int> shard = assign_shards(work, seconds, s.count);
  std::vector<WorkItem> out;
  for (size_t k = 0; k < work.size(); ++k)
    if (shard[k] == s.index) out.push_back(work[k]);
  return out;
}

ShardInfo describe_shard(const ShardSpec& s, const std::vector<Shape>& shapes, const std::vector<WorkItem>& share,
                         const std::vector<std::vector<ShapeResult>>& items) {
  ShardInfo info;
  info.index = s.index;
  info.count = s.count;
  for (const Shape& sh : shapes) info.shapes.push_back(sh.name);
  for (const WorkItem& w : share) {
    ShardUnit u;
    u.shape = shapes.at(w.shape).name;
    u.replicate = w.replicate;
    for (const ShapeResult& r : items.at(w.shape))
      if (r.replicates.at(0).index == w.replicate) {
        u.scored = true;
        u.bytes = r.bytes, u.flops = r.flops, u.raw_limit_us = r.raw_limit_us;
      }
    info.units.push_back(u);
  }
  return info;
}

}  // namespace scorer
