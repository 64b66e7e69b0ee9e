// The scorer's subcommands. main.cpp dispatches `scorer <command> [args]` to
// these; each parses its own options (args excludes the command name), prints
// its own --help, and returns an exit code from exit_codes.h.
#pragma once

#include <string>
#include <vector>

namespace scorer {

int run_main(const std::vector<std::string>& args);      // score shapes (run.cpp)
int check_main(const std::vector<std::string>& args);    // correctness only (run.cpp)
int list_main(const std::vector<std::string>& args);     // list shapes and variants (run.cpp)
int diff_main(const std::vector<std::string>& args);     // compare two results files (diff.cpp)
int select_main(const std::vector<std::string>& args);   // promote a run to results/best.json (history.cpp)
int history_main(const std::vector<std::string>& args);  // list previous bests (history.cpp)
int package_main(const std::vector<std::string>& args);  // build or verify the upload tarball (package.cpp)
int merge_main(const std::vector<std::string>& args);    // join the shards of a run (merge.cpp)
int report_main(const std::vector<std::string>& args);   // HTML page of a run beside the best (report.cpp)

}  // namespace scorer
