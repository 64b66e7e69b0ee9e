// `scorer run`, `scorer check` and `scorer list`: validate the shapes, measure
// each GPU's ceilings in a child process (gpus.h), score every replicate of
// every shape in a child process of its own (a crash or hang fails that shape
// alone; see replicates.h), one at a time or one per GPU (dispatch.h), then
// compute the statistics, print the table, save the JSON and compare with the
// selected best. A shard (shard.h) scores its share and saves it for merge.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "build_info.h"
#include "reference/baselines.h"
#include "scorer/child_process.h"
#include "scorer/commands.h"
#include "scorer/diff.h"
#include "scorer/dispatch.h"
#include "scorer/exit_codes.h"
#include "scorer/gpus.h"
#include "scorer/recorded.h"
#include "scorer/replicates.h"
#include "scorer/results_json.h"
#include "scorer/shape_child.h"
#include "scorer/shard.h"
#include "scorer/stats.h"
#include "scorer/table.h"
#include "scorer/text_table.h"
#include "scorer/workload.h"
#include "submission/submission.h"

namespace scorer {
namespace {

const char* kRunHelp = R"(usage: scorer run [options]      score shapes: correctness, timing, speedups
       scorer check [options]    correctness only (no timing)

options:
  --shapes FILE         shapes file (default shapes.toml)
  --filter GLOB[,GLOB]  only shapes whose whole name matches one of the globs
  --regime NAME         only shapes of this regime (repeatable)
  --variant OP=NAME     score submission variant NAME for op OP (repeatable; see scorer list)
  --baseline OP=NAME    time against baseline NAME for op OP (repeatable; see scorer list),
                        e.g. moe=cublas_grouped_sync, the MoE baseline that synchronises
  --seed N              input seed (default 20261129); each replicate's is derived from it
  --replicates N        score every shape N times, each in a process of its own with fresh
                        allocations and inputs, interleaved across shapes (default 3; run only)
  --out FILE            results file (default results/latest.json); every run is also kept
                        in results/runs/
  --best FILE           selected best to compare with at the end (default results/best.json)
  --no-diff             do not compare with the selected best
  --recorded FILE       also show speedups against recorded baseline times (e.g.
                        baselines/h200-serving-stack.toml), labelled as recorded
  --graph               also time launches replayed from CUDA graphs (labelled as such)
  --target PCT          stop timing a replicate when its median's 95% half-width is under
                        PCT% of its speedup (default 1)
  --time-cap S          ... or after S seconds of timing it (default 2)
  --min-trials N        paired trials per replicate at least (default 30)
  --max-trials N        paired trials at most (default 2000)
  --sets N              weight sets rotated through the trials (default 3)
  --checks N            fresh-input checks before and after timing (default 3)
  --warmup N            untimed paired calls before the trials (default 5)
  --timer T             cupti (default): CUDA events, and CUPTI's kernel trace beside them, which
                        also guards the baseline from work that is not its own; events: events
                        alone (no second timer, no foreign-work guard)
  --flush F             how the L2 is flushed before each timed call: read (default) or write
                        (the former flush, to measure its effect)
  --shape-timeout S     a replicate that has not finished after S seconds is killed and
                        fails its shape as a hang (default 300)
  --gpus all|N|LIST     score on several GPUs at once, one replicate per GPU, each in a process
                        that sees that GPU alone: every GPU, the first N, or ordinals (0,2,3);
                        longest shapes first, every shape's replicate r handed out before any
                        replicate r+1; each GPU calibrated and listed in the header, one whose
                        copy bandwidth or empty launch differs from the others' by over 3%
                        flagged (default: GPU 0 alone)
  --shard I/N           score shard I of N: a fixed share of the (shape, replicate) units,
                        the same on every host, for a cluster's job array; writes a partial
                        file (default --out results/shard-I-of-N.json), no diff; join the N
                        files with scorer merge (run only)
  -h, --help            this text

exit codes: 0 all correct, 1 a correctness failure, 2 bad input, 3 no usable GPU or a
CUDA error outside any one shape, 130 interrupted (Ctrl-C or SIGTERM: the shape in
progress is dropped, those done are printed and kept in results/runs/*-interrupted.json)
)";

struct CliError {
  std::string message;
};

constexpr int64_t kMaxSeed = 9000000000000000;

struct Options {
  std::string shapes = "shapes.toml";
  std::vector<std::string> filters, regimes;
  std::map<std::string, std::string> variants;
  std::string out = "results/latest.json", best = "results/best.json", recorded;
  bool diff = true;
  int replicates = 3;
  double shape_timeout_s = 300;
  GpuChoice gpus;   // --gpus; not given: GPU 0 as the process finds it
  ShardSpec shard;  // --shard; index 0: the whole run
  RunOptions run;
};

double parse_number(const std::string& flag, const std::string& v, double lo, double hi) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used != v.size() || !(x >= lo && x <= hi)) throw std::invalid_argument(v);
    return x;
  } catch (const std::exception&) {
    std::ostringstream s;
    s << "command line: " << flag << ": expected a number in [" << lo << ", " << hi << "], got '" << v << "'";
    throw CliError{s.str()};
  }
}

// A count or a seed: a whole number, not one cut short (`--seed 1.5` is a
// typo, not seed 1). hi stays below 2^53, where doubles hold every integer.
int64_t parse_integer(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  const double x = parse_number(flag, v, double(lo), double(hi));
  if (x != std::floor(x))
    throw CliError{"command line: " + flag + ": expected a whole number, got '" + v + "'"};
  return int64_t(x);
}

// The results file must be writable before any shape is scored, not found
// unwritable after all of them: the nearest existing ancestor of its
// directory must be a writable directory, and the file itself no directory.
// It may not be the selected best either, which only `scorer select`
// replaces (after its checks, keeping the old one in the history).
void check_results_target(const std::string& out, const std::string& best) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target = fs::absolute(out, ec);
  if (fs::is_directory(target, ec))
    throw CliError{"command line: --out " + out + ": is a directory, not a results file"};
  fs::path dir = target.parent_path();
  while (!fs::exists(dir, ec) && dir != dir.root_path()) dir = dir.parent_path();
  if (!fs::is_directory(dir, ec))
    throw CliError{"command line: --out " + out + ": " + dir.string() + " is not a directory"};
  if (access(dir.c_str(), W_OK) != 0)
    throw CliError{"command line: --out " + out + ": cannot write in " + dir.string() + ": " + std::strerror(errno)};
  if (fs::weakly_canonical(target, ec) == fs::weakly_canonical(fs::absolute(best, ec), ec))
    throw CliError{"command line: --out " + out +
                   ": is the selected best (--best), which only scorer select replaces"};
}

// `--variant` or `--baseline` OP=NAME: the op ("moe" for moe_w4a16) and the
// name, an op given once.
std::pair<std::string, std::string> op_and_name(const std::string& flag, const std::string& v,
                                                const std::map<std::string, std::string>& given) {
  const size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
    throw CliError{"command line: " + flag + ": expected OP=NAME, got '" + v + "'"};
  std::string op = v.substr(0, eq);
  if (op == "moe") op = "moe_w4a16";
  Op parsed;
  if (!parse_op(op, &parsed))
    throw CliError{"command line: " + flag + ": unknown op '" + op + "' (pooler, dense, router, moe_w4a16)"};
  if (given.count(op)) throw CliError{"command line: " + flag + ": op " + op + " given twice"};
  return {op, v.substr(eq + 1)};
}

Options parse_options(const std::vector<std::string>& args, bool timing) {
  Options o;
  o.run.time = timing;
  std::set<std::string> seen;  // options that take one value: a second is a mistake, not an override
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a != "--filter" && a != "--regime" && a != "--variant" && a != "--baseline" && !seen.insert(a).second)
      throw CliError{"command line: " + a + " given twice"};
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw CliError{"command line: " + a + " needs a value"};
      return args[++i];
    };
    if (a == "--shapes") o.shapes = value();
    else if (a == "--filter") {
      std::stringstream ss(value());
      for (std::string g; std::getline(ss, g, ',');)
        if (!g.empty()) o.filters.push_back(g);
    } else if (a == "--regime") o.regimes.push_back(value());
    else if (a == "--variant" || a == "--baseline") {
      const bool variant = a == "--variant";
      const auto [op, name] = op_and_name(a, value(), variant ? o.variants : o.run.baselines);
      std::vector<std::string> known;
      if (variant) known = submission::variants(op);
      else
        for (const reference::BaselineInfo& b : reference::baselines(op)) known.push_back(b.name);
      if (name != "default" && std::find(known.begin(), known.end(), name) == known.end()) {
        std::string list;
        for (auto& k : known) list += (list.empty() ? "" : ", ") + k;
        throw CliError{"command line: " + a + ": op " + op + " has no " + (variant ? "variant" : "baseline") + " '" +
                       name + "' (known: " + list + ")"};
      }
      (variant ? o.variants : o.run.baselines)[op] = name;
    } else if (a == "--seed") o.run.seed = uint64_t(parse_integer(a, value(), 0, kMaxSeed));
    else if (a == "--replicates") o.replicates = int(parse_integer(a, value(), 1, 100));
    else if (a == "--out") o.out = value();
    else if (a == "--best") o.best = value();
    else if (a == "--no-diff") o.diff = false;
    else if (a == "--recorded") o.recorded = value();
    else if (a == "--graph") o.run.graph = true;
    else if (a == "--target") o.run.stop.target_rel_halfwidth = parse_number(a, value(), 0.01, 100) / 100;
    else if (a == "--time-cap") o.run.stop.time_cap_s = parse_number(a, value(), 0, 3600);
    else if (a == "--min-trials") o.run.stop.min_trials = int(parse_integer(a, value(), 1, 1000000));
    else if (a == "--max-trials") o.run.stop.max_trials = int(parse_integer(a, value(), 1, 1000000));
    else if (a == "--sets") o.run.sets = int(parse_integer(a, value(), 1, 16));
    else if (a == "--checks") o.run.checks = int(parse_integer(a, value(), 1, 1000));
    else if (a == "--warmup") o.run.warmup = int(parse_integer(a, value(), 0, 1000));
    else if (a == "--timer") {
      const std::string v = value();
      if (v != "events" && v != "cupti")
        throw CliError{"command line: --timer: expected events or cupti, got '" + v + "'"};
      o.run.trace = v == "cupti";
    } else if (a == "--flush") {
      const std::string v = value();
      if (v != "read" && v != "write")
        throw CliError{"command line: --flush: expected read or write, got '" + v + "'"};
      o.run.flush = v == "read" ? FlushMode::read : FlushMode::write;
    } else if (a == "--shape-timeout") o.shape_timeout_s = parse_number(a, value(), 1, 86400);
    else if (a == "--gpus" || (a == "--shard" && timing)) {
      const std::string v = value();
      try {
        if (a == "--gpus") o.gpus = parse_gpu_choice(v);
        else o.shard = parse_shard(v);
      } catch (const std::invalid_argument& e) {
        throw CliError{"command line: " + a + ": " + e.what()};
      }
    }
    else throw CliError{"command line: unknown option '" + a + "' (see scorer run --help)"};
  }
  if (o.run.stop.min_trials > o.run.stop.max_trials) throw CliError{"command line: --min-trials is above --max-trials"};
  if (o.shard.index > 0) {  // a partial run: no diff, and a file of its own
    o.diff = false;
    if (!seen.count("--out")) o.out = default_shard_path(o.shard);
  }
  if (timing) check_results_target(o.out, o.best);
  if (!timing) o.replicates = 1;  // correctness needs no interval
  return o;
}

std::string shell_line(const char* cmd) {
  std::string out;
  if (FILE* p = popen(cmd, "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string utc_now(const char* fmt) {
  const std::time_t t = std::time(nullptr);
  char b[64];
  std::strftime(b, sizeof b, fmt, std::gmtime(&t));
  return b;
}

RunMeta start_meta(const Options& o, const ShapesFile& sf, const std::vector<std::string>& args, bool timing) {
  RunMeta m;
  m.scorer_version = std::string(SCORER_CODE_SHA256).substr(0, 16);
  m.submission_sha256 = SCORER_SUBMISSION_SHA256;
  // Outside a git checkout both stay empty/false (git prints its errors to stderr).
  m.git_commit = shell_line("git rev-parse --verify -q HEAD 2>/dev/null");
  m.git_dirty = !m.git_commit.empty() && !shell_line("git status --porcelain 2>/dev/null").empty();
  m.command_line = timing ? "scorer run" : "scorer check";
  for (const auto& a : args) m.command_line += " " + a;
  m.started_at = utc_now("%Y-%m-%dT%H:%M:%SZ");
  m.shapes_path = sf.path;
  m.shapes_sha256 = sf.sha256;
  m.seed = o.run.seed;
  m.mode = "events";
  m.replicates = o.replicates;
  m.timer = o.run.trace ? "events+cupti" : "events";
  for (const char* op : {"pooler", "dense", "router", "moe_w4a16"}) {
    auto it = o.variants.find(op);
    m.variants[op] = it == o.variants.end() ? "default" : it->second;
    const auto b = o.run.baselines.find(op);
    m.baselines[op] = b == o.run.baselines.end() ? reference::baselines(op).front().name : b->second;
  }
  m.scoring = sf.scoring;
  return m;
}

// The scoring loop (replicates.h, dispatch.h): every (shape, replicate) of
// the work list, or of this shard's share, in a child of its own on one of
// the lanes, with a progress line as each ends. Ctrl-C or SIGTERM drops the
// items in progress; the shapes with a replicate scored are kept.
void score_replicates(const Options& o, const std::vector<Shape>& shapes, const std::vector<GpuLane>& lanes,
                      RunResult& run) {
  std::vector<WorkItem> work = make_work_list(shapes, o.replicates, o.run.seed);
  if (o.gpus.given || o.shard.index > 0) {  // one GPU and the whole run keep the shapes file's order
    std::vector<double> seconds;
    for (const Shape& s : shapes) seconds.push_back(estimated_seconds(s, o.run.seed));
    longest_first(work, seconds);
    work = shard_work(work, seconds, o.shard);
  }
  std::mutex print;  // one lane's lines whole
  const ScoreOnLane score = [&](const WorkItem& w, size_t k, size_t lane) {
    const Shape& s = shapes[w.shape];
    RunOptions ro = o.run;
    ro.candidate.variant = run.meta.variants[op_name(s.op)];
    // Numbered by the list: an item skipped after a failure shows as a gap.
    const std::string label = "[" + std::to_string(k + 1) + "/" + std::to_string(work.size()) + "] " + s.name +
                              (o.replicates > 1 ? " replicate " + std::to_string(w.replicate) + "/" +
                                                      std::to_string(o.replicates)
                                                : "") +
                              (lanes.size() > 1 ? " on GPU " + std::to_string(lane) : "");
    ShapeResult r = score_shape_in_child(s, {w.replicate, w.seed, int(lane)}, ro, lanes[lane].meta, label,
                                         o.shape_timeout_s, lanes[lane].visible);
    std::lock_guard<std::mutex> lock(print);
    if (stop_requested()) return r;
    if (r.status != "ok")
      std::cerr << label << ": FAILED (" << r.status << "): " << r.reason
                << (w.replicate < o.replicates ? " (not scored again)" : "") << "\n";
    else
      std::cerr << label << ": done in " << int(r.replicates[0].seconds + 0.5) << " s\n";
    return r;
  };
  const auto items = score_on_lanes(shapes.size(), work, lanes.size(), score, [] { return stop_requested(); });
  if (o.shard.index > 0) run.meta.shard = describe_shard(o.shard, shapes, work, items);
  assemble_run(run, shapes, items, o.replicates, o.run.time);
  for (const ShapeResult& r : run.shapes)
    if (r.status == "baseline disturbed")
      std::cerr << "scorer: " << r.shape.name << ": FAILED (" << r.status << "): " << r.reason << "\n";
}

// `scorer check`: one line per shape with its verdict and worst errors.
void print_check_table(std::ostream& out, const RunResult& run) {
  using A = TextTable::Align;
  TextTable table({"shape", "regime", "correct", "checks", "rel L2", "worst/bound", "note"},
                  {A::left, A::left, A::left, A::right, A::right, A::right, A::left});
  for (const auto& r : run.shapes)
    table.add({r.shape.name, r.shape.regime, r.status == "ok" ? "yes" : r.status, std::to_string(r.check.checks),
               format_number("%.3g", r.check.rel_l2), format_number("%.3g", r.check.worst_elem), r.reason});
  table.print(out);
  out << "correctness " << (run.correctness_passed ? "passed" : "FAILED") << ": " << run.shapes.size() - run.shapes_failed
      << " of " << run.shapes.size() << " shapes correct\n";
}

int score(const std::vector<std::string>& args, bool timing) {
  for (const auto& a : args)
    if (a == "-h" || a == "--help") {
      std::cout << kRunHelp;
      return kExitOk;
    }
  Options o;
  ShapesFile sf;
  Recorded rec;
  std::vector<Shape> shapes;
  try {
    o = parse_options(args, timing);
    sf = load_shapes(o.shapes);
    shapes = select_shapes(sf, o.filters, o.regimes);
    if (!o.recorded.empty()) {
      rec = load_recorded(o.recorded);
      for (const std::string& w : recorded_unknown_names(rec, sf)) std::cerr << "scorer: warning: " << w << "\n";
    }
  } catch (const CliError& e) {
    std::cerr << e.message << "\n";
    return kExitBadInput;
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  }
  RunResult run;
  run.meta = start_meta(o, sf, args, timing);
  // Ctrl-C or SIGTERM stops after killing the shape in progress; the shapes
  // already scored are kept (below).
  catch_stop_signals();
  std::string failure, no_trace, bad_choice;
  std::cerr << "scorer: measuring the GPU" << (o.gpus.given ? "s" : "")
            << " (copy bandwidth, matrix rate, launch cost)\n";
  std::vector<GpuLane> lanes = start_lanes(o.gpus, run.meta, o.run.trace, &no_trace, &failure, &bad_choice);
  if (stop_requested()) {
    std::cerr << "scorer: interrupted\n";
    return kExitInterrupted;
  }
  if (!bad_choice.empty()) {
    std::cerr << "command line: --gpus: " << bad_choice << "\n";
    return kExitBadInput;
  }
  if (lanes.empty()) {
    std::cerr << "scorer: no usable GPU: " << failure << "\n";
    return kExitNoGpu;
  }
  run.meta = lanes[0].meta;  // the run's figures are its first GPU's; every GPU's are in meta.gpus
  for (const GpuLane& lane : lanes) run.meta.gpus.push_back(lane.info);
  if (!no_trace.empty()) {
    std::cerr << "scorer: CUPTI unavailable (" << no_trace
              << "): timing with events alone, without the second timer or the foreign-work guard\n";
    o.run.trace = false;
    run.meta.timer = "events";
  }
  if (!o.recorded.empty()) {
    try {
      check_recorded_gpu(rec, run.meta.gpu_name);
    } catch (const InputError& e) {
      std::cerr << e.what() << "\n";
      return kExitBadInput;
    }
  }
  print_gpu_header(std::cerr, lanes);
  std::cerr << "scorer: timer " << run.meta.timer << ", " << run.meta.replicates << " replicate"
            << (run.meta.replicates == 1 ? "" : "s") << " per shape"
            << (o.shard.index > 0 ? ", shard " + std::to_string(o.shard.index) + " of " +
                                        std::to_string(o.shard.count)
                                  : "")
            << "\n";

  score_replicates(o, shapes, lanes, run);

  if (!stop_requested()) {
    read_end_clocks(lanes);
    run.meta.sm_clock_mhz_end = lanes[0].meta.sm_clock_mhz_end;
    run.meta.mem_clock_mhz_end = lanes[0].meta.mem_clock_mhz_end;
    run.meta.throttle_reasons |= lanes[0].meta.throttle_reasons;
    for (size_t i = 0; i < lanes.size(); ++i) {
      const RunMeta& m = lanes[i].meta;
      std::cerr << "scorer: clocks at the end " << (lanes.size() > 1 ? "(GPU " + std::to_string(i) + ") " : "")
                << clocks_line(m.sm_clock_mhz_end, m.mem_clock_mhz_end, m.throttle_reasons, m.nvml) << "\n";
    }
  }
  // Also a stop during the last clock reading: the run is then not saved as whole.
  const bool interrupted = stop_requested();
  run.meta.interrupted = interrupted;
  if (interrupted)
    std::cerr << "scorer: interrupted: " << run.shapes.size() << " of " << shapes.size()
              << " shapes have a replicate scored\n";

  if (!o.recorded.empty()) apply_recorded(run, rec);
  BootstrapOptions bo;
  bo.seed = o.run.seed;
  compute_statistics(run, bo);
  std::cout << "\n";
  if (timing) {
    print_table(std::cout, run);
    // An interrupted run is kept apart: latest.json always holds a whole run.
    try {
      if (o.shard.index > 0 && !interrupted) {  // a share of a run: its file alone, for scorer merge
        save_results(run, o.out);
        std::cout << "\nshard " << o.shard.index << " of " << o.shard.count << ": " << o.out
                  << " (scorer merge joins the shards)\n";
        return run.correctness_passed ? kExitOk : kExitIncorrect;
      }
      const std::string keep = "results/runs/" + utc_now("%Y%m%dT%H%M%SZ") + "-" +
                               (run.meta.git_commit.empty() ? "nogit" : run.meta.git_commit.substr(0, 8)) +
                               (interrupted ? "-interrupted" : "") + ".json";
      // Both are attempted whatever becomes of the other: the run is lost
      // only if neither can be written, and each failure is reported.
      std::string keep_failed;
      try {
        save_results(run, keep);
      } catch (const std::exception& e) {
        keep_failed = e.what();
      }
      if (!interrupted) {
        try {
          save_results(run, o.out);
        } catch (const std::exception& e) {
          throw std::runtime_error(std::string(e.what()) +
                                   (keep_failed.empty() ? " (the run is kept as " + keep + ")" : "; " + keep_failed));
        }
      }
      if (!keep_failed.empty()) throw std::runtime_error(keep_failed);
      if (interrupted)
        std::cout << "\npartial results (" << run.shapes.size() << " of " << shapes.size() << " shapes): " << keep
                  << "\n";
      else
        std::cout << "\nresults: " << o.out << " (kept as " << keep << ")\n";
    } catch (const std::exception& e) {
      std::cerr << "scorer: cannot save results: " << e.what() << "\n";
      return kExitBadInput;
    }
    struct stat st{};
    if (!interrupted && o.diff && stat(o.best.c_str(), &st) == 0) {
      std::cout << "\ncompared with the selected best (" << o.best << "):\n";
      try {
        DiffOptions d;
        print_diff(std::cout, run, load_results(o.best), d);
      } catch (const InputError& e) {
        std::cerr << e.what() << "\n";
      }
    }
  } else {
    print_check_table(std::cout, run);
  }
  if (interrupted) return kExitInterrupted;
  return run.correctness_passed ? kExitOk : kExitIncorrect;
}

}  // namespace

int run_main(const std::vector<std::string>& args) { return score(args, true); }
int check_main(const std::vector<std::string>& args) { return score(args, false); }

int list_main(const std::vector<std::string>& args) {
  std::string path = "shapes.toml";
  uint64_t seed = RunOptions{}.seed;
  for (const auto& a : args)
    if (a == "-h" || a == "--help") {
      std::cout << "usage: scorer list [--shapes FILE] [--seed N]\n"
                   "lists the shapes (dims, minimal bytes, FLOPs), each op's submission variants and its baselines\n";
      return kExitOk;
    }
  ShapesFile sf;
  try {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a != "--shapes" && a != "--seed")
        throw CliError{"command line: unknown option '" + a + "' (see scorer list --help)"};
      if (i + 1 >= args.size()) throw CliError{"command line: " + a + " needs a value"};
      if (a == "--shapes") path = args[++i];
      else seed = uint64_t(parse_integer(a, args[++i], 0, kMaxSeed));
    }
    sf = load_shapes(path);
  } catch (const CliError& e) {
    std::cerr << e.message << "\n";
    return kExitBadInput;
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  }
  std::printf("%-22s %-10s %-10s %-52s %10s %10s\n", "shape", "op", "regime", "dims", "MB", "GFLOP");
  for (const auto& s : sf.shapes) {
    const std::vector<Routing> pool = s.op == Op::moe_w4a16 ? routing_pool(s, shape_seed(seed, s)) : std::vector<Routing>{};
    std::printf("%-22s %-10s %-10s %-52s %10.2f %10.3f\n", s.name.c_str(), op_name(s.op), s.regime.c_str(),
                s.dims_string().c_str(), pool_min_bytes(s, pool) / 1e6, pool_flops(s, pool) / 1e9);
  }
  std::printf("\nvariants (scorer run --variant OP=NAME):\n");
  for (const char* op : {"pooler", "dense", "router", "moe_w4a16"}) {
    std::string list;
    for (const auto& v : submission::variants(op)) list += (list.empty() ? "" : ", ") + v;
    std::printf("  %-10s %s\n", op, list.c_str());
  }
  std::printf("\nbaselines, the default first (scorer run --baseline OP=NAME):\n");
  for (const char* op : {"pooler", "dense", "router", "moe_w4a16"}) {
    std::string list;
    for (const auto& b : reference::baselines(op))
      list += (list.empty() ? "" : ", ") + std::string(b.name) + (b.synchronizes ? " (synchronises)" : "");
    std::printf("  %-10s %s\n", op, list.c_str());
  }
  return kExitOk;
}

}  // namespace scorer
