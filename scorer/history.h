// The selected best and its history, under a results directory DIR
// (`results` unless --results-dir says otherwise):
//   DIR/best.json                          the selected run
//   DIR/history/<UTC time>-<commit>.json   every previous best, byte for byte;
//                                          the time and commit are the run's
//   DIR/history/index.tsv                  one line per event, tab-separated:
//     time  commit  dirty  aggregate  lo  hi  file  event
//   where event is `retired` (a best replaced; file is its copy under history/)
//   or `selected` (a run promoted; file is best.json, where it went).
//
// Selecting never loses a run and is all or nothing: the new best, the
// previous best's archived copy and the new index are written as temporaries
// first; then the copy gets a name not taken before (a taken name gets a -2,
// -3... suffix, never overwritten), the index and then best.json are renamed
// into place; a failure at any step undoes the steps before it, so the best
// and the history always agree. Bad input (an unreadable run, best.json or
// index) stops before anything is written.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace scorer {

struct HistoryEntry {
  std::string time;    // the run's meta.started_at
  std::string commit;  // its meta.git_commit, "-" when none
  bool dirty = false;
  double aggregate = 0, lo = 0, hi = 0;
  std::string file;   // relative to DIR
  std::string event;  // "selected" or "retired"
  int line = 0;       // in index.tsv
};

// Reads DIR/history/index.tsv; empty when there is none. Throws InputError
// naming the line and field of the first malformed line.
std::vector<HistoryEntry> load_history(const std::string& results_dir);

// Promotes the run at `run_path` to DIR/best.json, only when it passed
// correctness on every shape. Returns kExitOk (also when it already is the
// selected run), kExitIncorrect when it did not pass, kExitBadInput on bad
// input; messages go to `out` and errors, one line each, to `err`.
int select_run(const std::string& run_path, const std::string& results_dir, std::ostream& out, std::ostream& err);

// For tests: called with "archived", "prepared" and "indexed" as select
// reaches each step of its commit; a hook that throws makes that step fail.
void set_select_step_hook(std::function<void(const std::string&)> hook);

// Prints the selected best and the history as a table.
int print_history(const std::string& results_dir, std::ostream& out, std::ostream& err);

}  // namespace scorer
