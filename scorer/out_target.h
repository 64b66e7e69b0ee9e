// Where an --out may write (run, report, package): checked before any work,
// so that a run is never scored only to find its target refused.
//
// Refused always: a target that exists and is not a regular file (a directory,
// a device such as /dev/null, a FIFO, a socket, a symbolic link), one in a
// directory that cannot be written, and the paths in `never`. Refused unless
// `force`: a protected file, i.e. one the results directory or the tree
// depends on: RESULTS/best.json, RESULTS/latest.json, anything under
// RESULTS/history/ or RESULTS/runs/, the command's own input files, and,
// relative to the current directory (the checkout's root), shapes.toml and
// anything under shapes/, submission/, reference/, scorer/, baselines/,
// tests/, scripts/, docs/ or .git/, and the Makefile and README.md. Paths are
// compared after resolving symbolic links and `..`.
#pragma once

#include <string>
#include <vector>

namespace scorer {

struct OutTarget {
  std::string flag = "--out";  // as messages name it
  std::string path;            // the target
  std::string results_dir = "results";
  std::vector<std::string> inputs;  // files the command reads: protected too
  std::vector<std::string> never;   // refused even with force (run: the selected best)
  std::string never_why;            // why, e.g. "is the selected best (--best), which only scorer select replaces"
  bool force = false;
};

// Throws UsageError (command_line.h), "command line: --out PATH: <why>".
void check_out_target(const OutTarget& t);

// run's --out: never the selected best `best`, nor its `inputs` unless forced.
void check_results_target(const std::string& out, const std::string& best, bool force,
                          const std::vector<std::string>& inputs);

}  // namespace scorer
