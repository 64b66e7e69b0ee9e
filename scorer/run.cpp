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
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "build_info.h"
#include "dev/variants.h"
#include "reference/baselines.h"
#include "scorer/child_process.h"
#include "scorer/command_line.h"
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

// A git command's output, trimmed; empty where git fails or is missing.
std::string git_line(std::vector<std::string> argv) {
  argv.insert(argv.begin(), "git");
  std::string out;
  try {
    out = run_command(argv).out;
  } catch (const std::runtime_error&) {
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

RunMeta start_meta(const ScoreArgs& o, const ShapesFile& sf, const std::vector<std::string>& args, bool timing) {
  RunMeta m;
  m.scorer_version = std::string(SCORER_CODE_SHA256).substr(0, 16);
  m.submission_sha256 = SCORER_SUBMISSION_SHA256;
  // Outside a git checkout both stay empty/false (git prints its errors to stderr).
  m.git_commit = git_line({"rev-parse", "--verify", "-q", "HEAD"});
  m.git_dirty = !m.git_commit.empty() && !git_line({"status", "--porcelain"}).empty();
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
void score_replicates(const ScoreArgs& o, const std::vector<Shape>& shapes, const std::vector<GpuLane>& lanes,
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
    const std::string label =
        "[" + std::to_string(k + 1) + "/" + std::to_string(work.size()) + "] " + s.name +
        (o.replicates > 1 ? " replicate " + std::to_string(w.replicate) + "/" + std::to_string(o.replicates) : "") +
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
  out << "correctness " << (run.correctness_passed ? "passed" : "FAILED") << ": "
      << run.shapes.size() - run.shapes_failed << " of " << run.shapes.size() << " shapes correct\n";
}

int score(const std::vector<std::string>& args, bool timing) {
  ScoreArgs o;
  if (const int rc = parse_score_args(args, timing, &o); rc != kGoOn) return rc;
  ShapesFile sf;
  Recorded rec;
  std::vector<Shape> shapes;
  try {
    sf = load_shapes(o.shapes);
    shapes = select_shapes(sf, o.filters, o.regimes);
    if (!o.recorded.empty()) {
      rec = load_recorded(o.recorded);
      for (const std::string& w : recorded_unknown_names(rec, sf)) std::cerr << "scorer: warning: " << w << "\n";
    }
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
            << (o.shard.index > 0 ? ", shard " + std::to_string(o.shard.index) + " of " + std::to_string(o.shard.count)
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
  compute_run_statistics(run);
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
    struct stat st {};
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
  ListArgs o;
  if (const int rc = parse_list_args(args, &o); rc != kGoOn) return rc;
  ShapesFile sf;
  try {
    sf = load_shapes(o.shapes);
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  }
  const uint64_t seed = o.seed;
  using Align = TextTable::Align;
  TextTable shapes({"shape", "op", "regime", "dims", "MB", "GFLOP"},
                   {Align::left, Align::left, Align::left, Align::left, Align::right, Align::right});
  for (const auto& s : sf.shapes) {
    const std::vector<Routing> pool =
        s.op == Op::moe_w4a16 ? routing_pool(s, shape_seed(seed, s)) : std::vector<Routing>{};
    shapes.add({s.name, op_name(s.op), s.regime, s.dims_string(), format_number("%.2f", pool_min_bytes(s, pool) / 1e6),
                format_number("%.3f", pool_flops(s, pool) / 1e9)});
  }
  shapes.print(std::cout);
  std::cout.flush();
  std::printf("\nvariants (scorer run --variant OP=NAME; * in the upload, the others under dev/):\n");
  for (const char* op : {"pooler", "dense", "router", "moe_w4a16"}) {
    std::string list;
    for (const auto& v : submission::dev::variants(op))
      list += (list.empty() ? "" : ", ") + v + (submission::dev::in_upload(op, v) ? "*" : "");
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
