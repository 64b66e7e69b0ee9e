#include "scorer/command_line.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>
#include <set>
#include <sstream>

#include "dev/variants.h"
#include "reference/baselines.h"
#include "scorer/exit_codes.h"
#include "scorer/out_target.h"
#include "scorer/shapes.h"
#include "submission/submission.h"

namespace scorer {
namespace {

constexpr int64_t kMaxSeed = 9000000000000000;  // below 2^53, where doubles hold every integer

double parse_number(const std::string& flag, const std::string& v, double lo, double hi) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used != v.size() || !(x >= lo && x <= hi)) throw std::invalid_argument(v);
    return x;
  } catch (const std::exception&) {
    std::ostringstream s;
    s << "command line: " << flag << ": expected a number in [" << lo << ", " << hi << "], got '" << printable(v)
      << "'";
    throw UsageError(s.str());
  }
}

// One subcommand on CLI11 with the house rules: help on -h/--help, values
// checked by our own parsers (their messages), an option given twice refused
// unless marked repeatable, unknown arguments named.
class Command {
 public:
  // `positional`: the name of the positional arguments in the usage line and
  // how many may be given (0: none).
  Command(const std::string& name, const std::string& description, const std::string& footer,
          const std::string& positional = "", size_t max_positional = 0, const std::string& positional_help = "")
      : name_(name), app_(description, "scorer " + name), max_positional_(max_positional) {
    app_.set_help_flag("-h,--help", "this text");
    app_.allow_extras();  // named by parse() in our words
    app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app_.get_formatter()->column_width(24);
    app_.footer(footer);
    if (max_positional) app_.add_option(positional, positionals_, positional_help)->type_name("");
  }

  // A value handed to `store` as given; `store` checks it and throws UsageError.
  Command& value(const std::string& flag, const std::string& type, const std::string& help,
                 std::function<void(const std::string&)> store, bool repeatable = false) {
    if (!repeatable) {
      app_.add_option_function<std::string>(flag, std::move(store), help)->type_name(type);
      return *this;
    }
    // Every value, in the order given.
    auto each = [store](const std::vector<std::string>& vs) {
      for (const std::string& v : vs) store(v);
    };
    CLI::Option* o = app_.add_option_function<std::vector<std::string>>(flag, each, help)->type_name(type);
    o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->expected(1)->allow_extra_args(false);
    repeatable_.insert(o);
    return *this;
  }
  Command& text(const std::string& flag, const std::string& type, const std::string& help, std::string* to) {
    return value(flag, type, help, [to](const std::string& v) { *to = v; });
  }
  Command& flag(const std::string& flag, const std::string& help, bool* to, bool set_to = true) {
    app_.add_flag_callback(
        flag, [to, set_to] { *to = set_to; }, help);
    return *this;
  }

  int parse(const std::vector<std::string>& args, std::vector<std::string>* positionals = nullptr) {
    try {
      // An option that takes a value, given last with none.
      if (!args.empty())
        if (const CLI::Option* o = app_.get_option_no_throw(args.back()); o && o->get_items_expected_min() > 0)
          throw UsageError("command line: " + args.back() + " needs a value");
      std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
      app_.parse(reversed);
      for (const CLI::Option* o : app_.get_options())
        if (o->count() > 1 && !repeatable_.count(o) && !o->get_positional())
          throw UsageError("command line: " + o->get_name() + " given twice");
      if (!app_.remaining().empty()) unexpected(app_.remaining().front());
      if (positionals_.size() > max_positional_) unexpected(positionals_[max_positional_]);
      if (positionals) *positionals = positionals_;
      return kGoOn;
    } catch (const CLI::CallForHelp&) {
      std::cout << app_.help();
      return kExitOk;
    } catch (const CLI::ParseError& e) {
      std::cerr << "command line: " << printable(e.what()) << " (see scorer " << name_ << " --help)\n";
    } catch (const UsageError& e) {
      std::cerr << e.what() << "\n";
    }
    return kExitBadInput;
  }

 private:
  std::string name_;
  CLI::App app_;
  std::vector<std::string> positionals_;
  size_t max_positional_;
  std::set<const CLI::Option*> repeatable_;

  [[noreturn]] void unexpected(const std::string& a) const {
    throw UsageError("command line: unexpected argument '" + printable(a) + "' (see scorer " + name_ + " --help)");
  }
};

// `--variant` or `--baseline` OP=NAME: the op ("moe" for moe_w4a16), a name
// the op has, an op given once.
void op_choice(const std::string& flag, const std::string& v, bool variant, std::map<std::string, std::string>* to) {
  const size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
    throw UsageError("command line: " + flag + ": expected OP=NAME, got '" + printable(v) + "'");
  std::string op = v.substr(0, eq);
  const std::string name = v.substr(eq + 1);
  if (op == "moe") op = "moe_w4a16";
  Op parsed;
  if (!parse_op(op, &parsed))
    throw UsageError("command line: " + flag + ": unknown op '" + printable(op) +
                     "' (pooler, dense, router, moe_w4a16)");
  if (to->count(op)) throw UsageError("command line: " + flag + ": op " + op + " given twice");
  std::vector<std::string> known;
  if (variant)
    known = submission::dev::variants(op);
  else
    for (const reference::BaselineInfo& b : reference::baselines(op)) known.push_back(b.name);
  if (name != "default" && std::find(known.begin(), known.end(), name) == known.end()) {
    std::string list;
    for (auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw UsageError("command line: " + flag + ": op " + op + " has no " + (variant ? "variant" : "baseline") + " '" +
                     printable(name) + "' (known: " + list + ")");
  }
  (*to)[op] = name;
}

// --gpus and --shard: their parsers (gpus.h, shard.h) say what is wrong.
template <class Parse>
auto choice(const char* flag, const std::string& v, Parse parse) -> decltype(parse(v)) {
  try {
    return parse(v);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("command line: ") + flag + ": " + e.what());
  }
}

const char* kScoreFooter =
    "exit codes: 0 all correct, 1 a correctness failure, 2 bad input, 3 no usable GPU or a\n"
    "CUDA error outside any one shape, 130 interrupted (Ctrl-C or SIGTERM: the shape in\n"
    "progress is dropped, those done are printed and kept in results/runs/*-interrupted.json)\n"
    "limits: a shapes or recorded file of at most 1 MiB, a results file of at most 128 MiB\n";

// kGoOn, or kExitBadInput after saying why `t` may not be written.
int check_or_refuse(const OutTarget& t) {
  try {
    check_out_target(t);
    return kGoOn;
  } catch (const UsageError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  }
}

}  // namespace

int guarded(const std::string& cmd, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::cerr << "scorer " << cmd << ": out of host memory (the input asks for more than this host has)\n";
  } catch (const std::exception& e) {
    std::cerr << "scorer " << cmd << ": " << printable(e.what()) << "\n";
  } catch (...) {
    std::cerr << "scorer " << cmd << ": an unexpected error\n";
  }
  return kExitBadInput;
}

int64_t parse_whole_number(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  const double x = parse_number(flag, v, double(lo), double(hi));
  if (x != std::floor(x))
    throw UsageError("command line: " + flag + ": expected a whole number, got '" + printable(v) + "'");
  return int64_t(x);
}

int parse_score_args(const std::vector<std::string>& args, bool timing, ScoreArgs* out) {
  ScoreArgs& o = *out;
  o.run.time = timing;
  Command c(
      timing ? "run" : "check",
      timing ? "scorer run: score shapes: correctness, timing, speedups" : "scorer check: correctness only (no timing)",
      kScoreFooter);
  auto whole = [](const char* flag, int64_t lo, int64_t hi, auto* to) {
    return [=](const std::string& v) { *to = decltype(+*to)(parse_whole_number(flag, v, lo, hi)); };
  };
  auto real = [](const char* flag, double lo, double hi, double scale, double* to) {
    return [=](const std::string& v) { *to = parse_number(flag, v, lo, hi) / scale; };
  };
  c.text("--shapes", "FILE", "shapes file (default shapes.toml)", &o.shapes)
      .value(
          "--filter", "GLOB[,GLOB]", "only shapes whose whole name matches one of the globs (repeatable)",
          [&](const std::string& v) {
            if (v.empty()) throw UsageError("command line: --filter: an empty glob matches no shape");
            for (size_t at = 0;;) {
              const size_t comma = std::min(v.find(',', at), v.size());
              if (comma == at) throw UsageError("command line: --filter: an empty glob in '" + printable(v) + "'");
              o.filters.push_back(v.substr(at, comma - at));
              if (comma == v.size()) break;
              at = comma + 1;
            }
          },
          true)
      .value(
          "--regime", "NAME", "only shapes of this regime (repeatable)",
          [&](const std::string& v) { o.regimes.push_back(v); }, true)
      .value(
          "--variant", "OP=NAME", "score submission variant NAME for op OP (repeatable; see scorer list)",
          [&](const std::string& v) { op_choice("--variant", v, true, &o.variants); }, true)
      .value(
          "--baseline", "OP=NAME",
          "time against baseline NAME for op OP (repeatable; see scorer list),\n"
          "e.g. moe=cublas_grouped_sync, the MoE baseline that synchronises",
          [&](const std::string& v) { op_choice("--baseline", v, false, &o.run.baselines); }, true)
      .value("--seed", "N", "input seed (default 20261129); each replicate's is derived from it",
             whole("--seed", 0, kMaxSeed, &o.run.seed))
      .value("--replicates", "N",
             "score every shape N times, each in a process of its own with fresh\n"
             "allocations and inputs, interleaved across shapes (default 3; run only)",
             whole("--replicates", 1, 100, &o.replicates))
      .text("--out", "FILE",
            "results file (default results/latest.json); every run is also kept\n"
            "in results/runs/. Never a file the results or the tree depend on\n"
            "(best.json, history/, runs/, shapes files, submission/...) unless --force,\n"
            "never the selected best, never anything but a regular file",
            &o.out)
      .flag("--force", "let --out replace a protected plain file (not the selected best)", &o.force)
      .text("--best", "FILE", "selected best to compare with at the end (default results/best.json)", &o.best)
      .flag("--no-diff", "do not compare with the selected best", &o.diff, false)
      .text("--recorded", "FILE",
            "also show speedups against recorded baseline times (e.g.\n"
            "baselines/h200-serving-stack.toml), labelled as recorded",
            &o.recorded)
      .flag("--graph", "also time launches replayed from CUDA graphs (labelled as such)", &o.run.graph)
      .value("--target", "PCT",
             "stop timing a replicate when its median's 95% half-width is under\n"
             "PCT% of its speedup (default 1)",
             real("--target", 0.01, 100, 100, &o.run.stop.target_rel_halfwidth))
      .value("--time-cap", "S", "... or after S seconds of timing it (default 2)",
             real("--time-cap", 0, 3600, 1, &o.run.stop.time_cap_s))
      .value("--min-trials", "N", "paired trials per replicate at least (default 30)",
             whole("--min-trials", 1, 1000000, &o.run.stop.min_trials))
      .value("--max-trials", "N", "paired trials at most (default 2000)",
             whole("--max-trials", 1, 1000000, &o.run.stop.max_trials))
      .value("--sets", "N", "weight sets rotated through the trials (default 3)", whole("--sets", 1, 16, &o.run.sets))
      .value("--checks", "N", "fresh-input checks before and after timing (default 3)",
             whole("--checks", 1, 1000, &o.run.checks))
      .value("--warmup", "N", "untimed paired calls before the trials (default 5)",
             whole("--warmup", 0, 1000, &o.run.warmup))
      .value("--timer", "T",
             "cupti (default): CUDA events, and CUPTI's kernel trace beside them, which\n"
             "also guards the baseline from work that is not its own; events: events\n"
             "alone (no second timer, no foreign-work guard)",
             [&](const std::string& v) {
               if (v != "events" && v != "cupti")
                 throw UsageError("command line: --timer: expected events or cupti, got '" + printable(v) + "'");
               o.run.trace = v == "cupti";
             })
      .value("--flush", "F",
             "how the L2 is flushed before each timed call: read (default) or write\n"
             "(the former flush, to measure its effect)",
             [&](const std::string& v) {
               if (v != "read" && v != "write")
                 throw UsageError("command line: --flush: expected read or write, got '" + printable(v) + "'");
               o.run.flush = v == "read" ? FlushMode::read : FlushMode::write;
             })
      .value("--shape-timeout", "S",
             "a replicate that has not finished after S seconds is killed and\n"
             "fails its shape as a hang (default 300)",
             real("--shape-timeout", 1, 86400, 1, &o.shape_timeout_s))
      .value("--gpus", "all|N|LIST",
             "score on several GPUs at once, one replicate per GPU, each in a process\n"
             "that sees that GPU alone: every GPU, the first N, or ordinals (0,2,3);\n"
             "longest shapes first, every shape's replicate r handed out before any\n"
             "replicate r+1; each GPU calibrated and listed in the header, one whose\n"
             "copy bandwidth or empty launch differs from the others' by over 3%\n"
             "flagged (default: GPU 0 alone)",
             [&](const std::string& v) { o.gpus = choice("--gpus", v, parse_gpu_choice); });
  if (timing)
    c.value("--shard", "I/N",
            "score shard I of N: a fixed share of the (shape, replicate) units,\n"
            "the same on every host, for a cluster's job array; writes a partial\n"
            "file (default --out results/shard-I-of-N.json), no diff; join the N\n"
            "files with scorer merge (run only)",
            [&](const std::string& v) { o.shard = choice("--shard", v, parse_shard); });
  const std::string default_out = o.out;
  int rc = c.parse(args);
  if (rc != kGoOn) return rc;
  if (o.shard.index > 0) {  // a partial run: no diff, and a file of its own
    o.diff = false;
    if (o.out == default_out) o.out = default_shard_path(o.shard);
  }
  try {
    if (o.run.stop.min_trials > o.run.stop.max_trials)
      throw UsageError("command line: --min-trials is above --max-trials");
    if (timing) check_results_target(o.out, o.best, o.force, {o.shapes, o.recorded});
  } catch (const UsageError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  }
  if (!timing) o.replicates = 1;  // correctness needs no interval
  return kGoOn;
}

int parse_merge_args(const std::vector<std::string>& args, MergeArgs* out) {
  Command c("merge",
            "scorer merge SHARD.json...: joins the files of `scorer run --shard I/N` (one per shard,\n"
            "any order) into one results file of the same form as a run on one host; refuses shards of\n"
            "other builds, shapes files, seeds, replicate counts, baselines, scoring rules or GPU\n"
            "models, and overlapping or missing shards.",
            "exit codes: 0 all correct, 1 a correctness failure, 2 bad input (one line naming the\n"
            "file and the field)\nlimits: results files of at most 128 MiB\n",
            "SHARD.json", size_t(-1), "the shards' results files");
  c.text("--out", "FILE",
         "the merged results (default results/latest.json); never another file the\n"
         "results or the tree depend on unless --force, never anything but a regular file",
         &out->out)
      .flag("--force", "let --out replace a protected plain file", &out->force)
      .text("--recorded", "FILE", "also show speedups against recorded baseline times, as run does", &out->recorded);
  const int rc = c.parse(args, &out->shards);
  if (rc != kGoOn) return rc;
  OutTarget t;
  t.path = out->out;
  t.inputs = out->shards;
  t.inputs.push_back(out->recorded);
  // Like run, merge writes the latest results; the selected best never.
  t.never = {"results/best.json"};
  t.never_why = "is the selected best, which only scorer select replaces";
  t.force = out->force || out->out == "results/latest.json";
  return check_or_refuse(t);
}

int parse_list_args(const std::vector<std::string>& args, ListArgs* out) {
  Command c("list",
            "scorer list: the shapes (dims, minimal bytes, FLOPs), each op's submission variants and its baselines",
            "exit codes: 0 listed, 2 bad input\nlimits: a shapes file of at most 1 MiB\n");
  c.text("--shapes", "FILE", "shapes file (default shapes.toml)", &out->shapes)
      .value("--seed", "N", "input seed the moe routings are drawn from (default 20261129)",
             [&](const std::string& v) { out->seed = uint64_t(parse_whole_number("--seed", v, 0, kMaxSeed)); });
  return c.parse(args);
}

int parse_diff_args(const std::vector<std::string>& args, DiffArgs* out) {
  Command c("diff",
            "scorer diff [LATEST.json [BEST.json]]: compares a run (default DIR/latest.json) with the\n"
            "selected best (default DIR/best.json; DIR defaults to results) by the submission's own\n"
            "times: per shape, per regime and overall the change latest/selected with its 95%\n"
            "interval from both runs' replicates, and a verdict better/worse/same (the interval\n"
            "excludes no change and the change exceeds the minimum). The baselines' times are\n"
            "shown beside it and never decide.",
            "exit codes: 0 compared, 1 --fail-on met, 2 bad input or runs not comparable\n"
            "limits: results files of at most 128 MiB\n",
            "files", 2, "LATEST.json [BEST.json]: the runs to compare");
  c.text("--results-dir", "DIR", "where latest.json and best.json are (default results)", &out->results_dir)
      .flag("--force", "compare runs from different GPUs, shapes files, scorer versions or timing modes",
            &out->diff.force)
      .value("--min-change", "PCT",
             "the smallest change that counts (default: measured, 4 standard\n"
             "errors of a typical shape's change)",
             [&](const std::string& v) {
               const double pct = parse_number("--min-change", v, 0, 100);
               if (pct >= 100) throw UsageError("command line: --min-change: expected a percentage below 100");
               out->diff.min_change = pct / 100;
             })
      .value("--fail-on", "WHEN",
             "worse: exit 1 when a shape, a regime or the aggregate got worse;\n"
             "any-change: exit 1 when anything changed",
             [&](const std::string& v) {
               if (v == "worse")
                 out->diff.fail_on = FailOn::worse;
               else if (v == "any-change")
                 out->diff.fail_on = FailOn::any_change;
               else
                 throw UsageError("command line: --fail-on: expected worse or any-change, got '" + printable(v) + "'");
             });
  return c.parse(args, &out->files);
}

namespace {
// select and history: --results-dir and at most `max_positional` files.
int parse_results_dir_args(const std::vector<std::string>& args, const std::string& name,
                           const std::string& description, const std::string& footer, size_t max_positional,
                           ResultsDirArgs* out) {
  Command c(name, description, footer, "RUN.json", max_positional, "the run to promote (default DIR/latest.json)");
  c.text("--results-dir", "DIR", "the results directory (default results)", &out->results_dir);
  return c.parse(args, &out->files);
}
}  // namespace

int parse_select_args(const std::vector<std::string>& args, ResultsDirArgs* out) {
  return parse_results_dir_args(args, "select",
                                "scorer select [RUN.json]: promotes a run (default DIR/latest.json; DIR defaults to\n"
                                "results) to DIR/best.json, only when it passed correctness on every shape. The\n"
                                "previous best is kept under DIR/history/ and logged in DIR/history/index.tsv; all of\n"
                                "it happens or none of it.",
                                "exit codes: 0 selected, 1 the run did not pass, 2 bad input\n"
                                "limits: results files of at most 128 MiB, history/index.tsv of at most 16 MiB\n",
                                1, out);
}

int parse_history_args(const std::vector<std::string>& args, ResultsDirArgs* out) {
  return parse_results_dir_args(args, "history",
                                "scorer history: lists the selected best and every run selected or retired before "
                                "it\n(DIR/history/index.tsv; DIR defaults to results).",
                                "exit codes: 0 listed, 2 bad input\n", 0, out);
}

int parse_report_args(const std::vector<std::string>& args, ReportArgs* out) {
  Command c("report",
            "scorer report [LATEST.json]: writes a self-contained HTML page (default\n"
            "DIR/report.html; DIR defaults to results) with a bar per shape of the run (default\n"
            "DIR/latest.json) beside the selected best (default DIR/best.json, when there is one),\n"
            "and a table of the numbers. scripts/screenshot-report renders it to a PNG.",
            "exit codes: 0 written, 2 bad input\n"
            "limits: results files of at most 128 MiB\n",
            "LATEST.json", 1, "the run to draw (default DIR/latest.json)");
  c.text("--best", "BEST.json", "the selected best to draw beside it (default DIR/best.json)", &out->best)
      .text("--out", "FILE",
            "the page (default DIR/report.html); never a file the results or the tree\n"
            "depend on unless --force, never anything but a regular file",
            &out->out)
      .flag("--force", "let --out replace a protected plain file", &out->force)
      .text("--results-dir", "DIR", "the results directory (default results)", &out->results_dir);
  std::vector<std::string> pos;
  const int rc = c.parse(args, &pos);
  if (rc != kGoOn) return rc;
  if (!pos.empty()) out->latest = pos[0];
  const std::string& dir = out->results_dir;
  if (out->latest.empty()) out->latest = dir + "/latest.json";
  if (out->out.empty()) out->out = dir + "/report.html";
  OutTarget t;
  t.path = out->out;
  t.results_dir = dir;
  t.inputs = {out->latest, out->best};
  t.force = out->force;
  return check_or_refuse(t);
}

int parse_package_args(const std::vector<std::string>& args, PackageArgs* out) {
  Command c("package",
            "scorer package [--out FILE] | --verify FILE: writes a reproducible .tar.gz (default\n"
            "DIR/submission.tar.gz; DIR defaults to results) of the submission's files (those\n"
            "scripts/tree-hash hashes: nothing built or ignored) with a MANIFEST of their sha256,\n"
            "the git commit and the selected run it was scored with. Refuses when DIR/best.json is\n"
            "missing or was scored with another submission, unless --force (the MANIFEST then says\n"
            "so), and a symbolic link that leaves submission/.",
            "exit codes: 0 done (verified), 1 refused (does not match), 2 bad input\n"
            "limits: a tarball of at most 16 MiB holding at most 4096 members and 64 MiB\n");
  c.text("--out", "FILE",
         "the tarball; never a file the results or the tree depend on unless --force,\n"
         "never anything but a regular file",
         &out->package.out)
      .text("--results-dir", "DIR", "where best.json is (default results)", &out->package.results_dir)
      .flag("--force",
            "package without a selected best or with one scored with another submission;\n"
            "let --out replace a protected plain file",
            &out->package.force)
      .text("--verify", "FILE", "check a tarball against its MANIFEST", &out->verify);
  const int rc = c.parse(args);
  if (rc != kGoOn || !out->verify.empty()) return rc;
  OutTarget t;
  t.results_dir = out->package.results_dir;
  t.path = out->package.out.empty() ? t.results_dir + "/submission.tar.gz" : out->package.out;
  t.force = out->package.force;
  return check_or_refuse(t);
}

}  // namespace scorer
