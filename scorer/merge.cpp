#include "scorer/merge.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "scorer/command_line.h"
#include "scorer/dispatch.h"
#include "scorer/exit_codes.h"
#include "scorer/recorded.h"
#include "scorer/results_json.h"
#include "scorer/stats.h"
#include "scorer/table.h"

namespace scorer {
namespace {

// The meta fields the shards of one run share: the build, the shapes, the
// seed and replicates, what was timed against what and how, and the card.
const char* const kShared[] = {"scorer_version", "submission_sha256", "git_commit", "git_dirty", "shapes_sha256",
                               "seed",           "replicates",        "mode",       "timer",     "variants",
                               "baselines",      "scoring",           "gpu_name"};

[[noreturn]] void fail(const ShardFile& f, const std::string& field, const std::string& msg) {
  throw InputError(f.path + ": field '" + field + "': " + msg);
}

std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

std::string unit_name(const std::string& shape, int replicate) {
  return shape + " replicate " + std::to_string(replicate);
}

// Every shard given once, all of the same run as the first.
void check_same_run(const std::vector<ShardFile>& shards) {
  const ShardFile& first = shards[0];
  const nlohmann::json m0 = results_to_json(first.run)["meta"];
  std::map<int, const ShardFile*> by_index;
  for (const ShardFile& f : shards) {
    const RunMeta& m = f.run.meta;
    if (m.shard.index == 0) fail(f, "meta.shard", "missing: not a shard's file (scorer run --shard I/N writes them)");
    if (m.interrupted) fail(f, "meta.interrupted", "the shard was interrupted: score it again");
    const nlohmann::json mj = results_to_json(f.run)["meta"];
    for (const char* key : kShared)
      if (mj[key] != m0[key])
        fail(f, std::string("meta.") + key,
             shown(mj[key]) + ", but " + first.path + " has " + shown(m0[key]) + " (the shards of one run share it)");
    if (m.shard.count != first.run.meta.shard.count)
      fail(f, "meta.shard.count",
           "shard of " + std::to_string(m.shard.count) + ", but " + first.path + " is a shard of " +
               std::to_string(first.run.meta.shard.count));
    if (m.shard.shapes != first.run.meta.shard.shapes)
      fail(f, "meta.shard.shapes", "other shapes than " + first.path + "'s (the shards of one run select the same)");
    const auto [it, fresh] = by_index.emplace(m.shard.index, &f);
    if (!fresh)
      fail(f, "meta.shard.index", "shard " + std::to_string(m.shard.index) + " again (also " + it->second->path + ")");
  }
  for (int i = 1; i <= first.run.meta.shard.count; ++i)
    if (!by_index.count(i))
      fail(first, "meta.shard.count",
           std::to_string(first.run.meta.shard.count) + " shards, but shard " + std::to_string(i) +
               " is not among the files given");
}

// Every (shape, replicate) of the run in exactly one shard.
void check_units(const std::vector<ShardFile>& shards) {
  std::map<std::pair<std::string, int>, const ShardFile*> owner;
  for (const ShardFile& f : shards)
    for (const ShardUnit& u : f.run.meta.shard.units) {
      const auto [it, fresh] = owner.emplace(std::make_pair(u.shape, u.replicate), &f);
      if (!fresh)
        fail(f, "meta.shard.units",
             unit_name(u.shape, u.replicate) + " is also in " + it->second->path +
                 " (shards overlap: were they cut with the same shard count and shapes?)");
    }
  const RunMeta& m = shards[0].run.meta;
  for (const std::string& s : m.shard.shapes)
    for (int r = 1; r <= m.replicates; ++r)
      if (!owner.count({s, r}))
        fail(shards[0], "meta.shard.units", unit_name(s, r) + " is in none of the shards given");
  if (owner.size() != m.shard.shapes.size() * size_t(m.replicates))
    for (const auto& [unit, f] : owner)
      if (std::find(m.shard.shapes.begin(), m.shard.shapes.end(), unit.first) == m.shard.shapes.end() ||
          unit.second > m.replicates)
        fail(*f, "meta.shard.units", unit_name(unit.first, unit.second) + " is not a unit of the run");
}

}  // namespace

RunResult merge_shards(const std::vector<ShardFile>& shards, const std::string& command_line) {
  if (shards.empty()) throw InputError("command line: no shard files given");
  std::vector<const ShardFile*> order;  // by shard index
  for (const ShardFile& f : shards) order.push_back(&f);
  check_same_run(shards);
  check_units(shards);
  std::sort(order.begin(), order.end(),
            [](const ShardFile* a, const ShardFile* b) { return a->run.meta.shard.index < b->run.meta.shard.index; });

  RunResult run;
  run.meta = order[0]->run.meta;
  run.meta.shard = ShardInfo{};
  run.meta.gpus.clear();
  run.meta.command_line = command_line;
  const std::vector<std::string>& names = order[0]->run.meta.shard.shapes;
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < names.size(); ++i) index_of[names[i]] = i;
  std::vector<Shape> shapes(names.size());
  std::vector<std::vector<ShapeResult>> items(names.size());
  for (const ShardFile* f : order) {
    const RunMeta& m = f->run.meta;
    run.meta.started_at = std::min(run.meta.started_at, m.started_at);
    // This shard's GPUs in the merged list: the same GPU (host and uuid) once.
    std::vector<int> gpu_at;
    for (const GpuInfo& g : m.gpus) {
      size_t k = 0;
      while (k < run.meta.gpus.size() && !(run.meta.gpus[k].host == g.host && run.meta.gpus[k].uuid == g.uuid)) ++k;
      if (k == run.meta.gpus.size()) run.meta.gpus.push_back(g);
      gpu_at.push_back(int(k));
    }
    std::map<std::pair<std::string, int>, const ShardUnit*> units;
    for (const ShardUnit& u : m.shard.units) units[{u.shape, u.replicate}] = &u;
    std::set<std::pair<std::string, int>> seen;
    for (size_t i = 0; i < f->run.shapes.size(); ++i) {
      const ShapeResult& r = f->run.shapes[i];
      for (size_t k = 0; k < r.replicates.size(); ++k) {
        const ReplicateResult& p = r.replicates[k];
        const std::string at = "shapes[" + std::to_string(i) + "].replicates[" + std::to_string(k) + "]";
        const auto u = units.find({r.shape.name, p.index});
        if (u == units.end() || !u->second->scored)
          fail(*f, at + ".index",
               unit_name(r.shape.name, p.index) + " is not a scored unit of this shard (meta.shard.units)");
        if (p.gpu < 0 || size_t(p.gpu) >= gpu_at.size())
          fail(*f, at + ".gpu",
               "GPU " + std::to_string(p.gpu) + ", but meta.gpus lists " + std::to_string(gpu_at.size()));
        seen.insert({r.shape.name, p.index});
        ShapeResult item;  // as the replicate's process returned it (replicates.h: assemble_shape)
        item.shape = r.shape;
        item.variant = r.variant;
        item.status = p.status;
        item.reason = p.reason;
        item.bytes = u->second->bytes, item.flops = u->second->flops, item.raw_limit_us = u->second->raw_limit_us;
        item.replicates = {p};
        item.replicates[0].gpu = gpu_at[size_t(p.gpu)];
        shapes[index_of.at(r.shape.name)] = r.shape;
        items[index_of.at(r.shape.name)].push_back(std::move(item));
      }
    }
    for (const ShardUnit& u : m.shard.units)
      if (u.scored && !seen.count({u.shape, u.replicate}))
        fail(*f, "meta.shard.units",
             unit_name(u.shape, u.replicate) + " is marked scored, but shapes[] holds no such replicate");
  }
  for (std::vector<ShapeResult>& it : items) trim_after_failure(it);
  assemble_run(run, shapes, items, run.meta.replicates, true);
  compute_run_statistics(run);
  return run;
}

int merge_main(const std::vector<std::string>& args) {
  MergeArgs m;
  if (const int rc = parse_merge_args(args, &m); rc != kGoOn) return rc;
  const std::vector<std::string>& paths = m.shards;
  const std::string &out = m.out, &recorded = m.recorded;
  std::string command_line = "scorer merge";
  for (const std::string& a : args) command_line += " " + a;
  try {
    std::vector<ShardFile> shards;
    for (const std::string& p : paths) shards.push_back({p, load_results(p)});
    RunResult run = merge_shards(shards, command_line);
    if (!recorded.empty()) {
      const Recorded rec = load_recorded(recorded);
      check_recorded_gpu(rec, run.meta.gpu_name);
      apply_recorded(run, rec);
      compute_run_statistics(run);
    }
    print_table(std::cout, run);
    save_results(run, out);
    std::cout << "\nresults: " << out << " (merged from " << shards.size() << " shards)\n";
    return run.correctness_passed ? kExitOk : kExitIncorrect;
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "scorer: cannot save results: " << e.what() << "\n";
    return kExitBadInput;
  }
}

}  // namespace scorer
