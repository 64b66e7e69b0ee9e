// scorer: scores the submission's kernels against the baselines on the public
// shapes, and manages results (diff, select, history, report, package).
#include <iostream>
#include <string>
#include <vector>

#include "scorer/commands.h"
#include "scorer/exit_codes.h"

namespace {

const char* kHelp = R"(usage: scorer <command> [options]     (scorer <command> --help for its options)

commands:
  run       score every shape: correctness, paired cold timing against the baseline,
            floors, speedups with 95% intervals; writes results/latest.json
  check     correctness only, on fresh inputs, no timing
  list      the shapes, their bytes and FLOPs, and the submission's variants
  merge     join the results files of the shards of one run (run --shard I/N)
  diff      compare two results files (default results/latest.json against results/best.json)
  select    promote a results file to results/best.json (only when every shape is correct)
  history   the previously selected bests
  report    an HTML page of the latest run beside the selected best
  package   the submission tarball (or --verify one)

exit codes: 0 ok, 1 a correctness failure (or a --fail-on verdict, a select of a run
that did not pass, a package refused or a tarball not matching its MANIFEST), 2 bad
input, 3 no usable GPU or a CUDA error outside any one shape, 130 interrupted
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace scorer;
  if (argc < 2) {
    std::cerr << kHelp;
    return kExitBadInput;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::cout << kHelp;
    return kExitOk;
  }
  if (cmd == "run") return run_main(args);
  if (cmd == "check") return check_main(args);
  if (cmd == "list") return list_main(args);
  if (cmd == "diff") return diff_main(args);
  if (cmd == "select") return select_main(args);
  if (cmd == "history") return history_main(args);
  if (cmd == "report") return report_main(args);
  if (cmd == "merge") return merge_main(args);
  if (cmd == "package") return package_main(args);
  std::cerr << "command line: unknown command '" << cmd << "' (see scorer --help)\n";
  return kExitBadInput;
}
