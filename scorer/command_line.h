// The scorer's one option layer: every subcommand's options are declared in
// command_line.cpp on CLI11, so that all of them share one --help layout, one
// set of errors and one rule for an option given twice (refused, unless the
// option says it is repeatable). A bad command line is one line on stderr,
// "command line: ...", and exit code 2; --help prints on stdout, exit 0.
//
// Each parse_* takes the arguments after the command's name and returns
// kGoOn with *out filled, or the exit code the command must return at once
// (kExitOk after --help, kExitBadInput after a usage error, both printed).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "scorer/diff.h"
#include "scorer/gpus.h"
#include "scorer/package.h"
#include "scorer/shape_runner.h"
#include "scorer/shard.h"

namespace scorer {

constexpr int kGoOn = -1;

// A usage error found after parsing (a value out of range, a target that may
// not be written): the message is the whole line, "command line: ...".
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `scorer run` and `scorer check`.
struct ScoreArgs {
  std::string shapes = "shapes.toml";
  std::vector<std::string> filters, regimes;
  std::map<std::string, std::string> variants;  // op -> submission variant
  std::string out = "results/latest.json", best = "results/best.json", recorded;
  bool diff = true;
  bool force = false;  // --out may replace a protected plain file (never the selected best)
  int replicates = 3;
  double shape_timeout_s = 300;
  GpuChoice gpus;   // --gpus; not given: GPU 0 as the process finds it
  ShardSpec shard;  // --shard; index 0: the whole run
  RunOptions run;
};
int parse_score_args(const std::vector<std::string>& args, bool timing, ScoreArgs* out);

// `scorer merge`.
struct MergeArgs {
  std::vector<std::string> shards;  // SHARD.json...
  std::string out = "results/latest.json", recorded;
  bool force = false;  // --out may replace a protected plain file (never the selected best)
};
int parse_merge_args(const std::vector<std::string>& args, MergeArgs* out);

// `scorer list`.
struct ListArgs {
  std::string shapes = "shapes.toml";
  uint64_t seed = RunOptions{}.seed;
};
int parse_list_args(const std::vector<std::string>& args, ListArgs* out);

// `scorer diff`.
struct DiffArgs {
  std::string results_dir = "results";
  std::vector<std::string> files;  // LATEST.json [BEST.json]
  DiffOptions diff;
};
int parse_diff_args(const std::vector<std::string>& args, DiffArgs* out);

// `scorer select` (one optional RUN.json) and `scorer history` (none).
struct ResultsDirArgs {
  std::string results_dir = "results";
  std::vector<std::string> files;
};
int parse_select_args(const std::vector<std::string>& args, ResultsDirArgs* out);
int parse_history_args(const std::vector<std::string>& args, ResultsDirArgs* out);

// `scorer report`.
struct ReportArgs {
  std::string results_dir = "results";
  std::string latest, best, out;  // empty: the defaults under results_dir
  bool force = false;             // --out may replace a protected plain file
};
int parse_report_args(const std::vector<std::string>& args, ReportArgs* out);

// `scorer package`.
struct PackageArgs {
  PackageOptions package;
  std::string verify;  // --verify FILE: check this tarball instead of writing one
};
int parse_package_args(const std::vector<std::string>& args, PackageArgs* out);

// Runs a subcommand's body so that no exception ends the process (no exit
// 134): one that escapes is one line on stderr, "scorer CMD: ...", and exit
// code 2 (out of memory included: the input asked for more than the host has).
int guarded(const std::string& cmd, const std::function<int()>& body);

// A count or a seed from the command line: a whole number in [lo, hi], not one
// cut short (`--seed 1.5` is a typo, not seed 1). Throws UsageError.
int64_t parse_whole_number(const std::string& flag, const std::string& v, int64_t lo, int64_t hi);

}  // namespace scorer
