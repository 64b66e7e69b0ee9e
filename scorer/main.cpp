// scorer: scores the submission's kernels against the baselines on the public
// shapes, and manages results (diff, select, history, report, package).
#include <iostream>
#include <string>
#include <vector>

#include "scorer/command_line.h"
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
input (an error no check foresaw, out of host memory included, exits 2 too), 3 no
usable GPU or a CUDA error outside any one shape, 130 interrupted
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
  using Main = int (*)(const std::vector<std::string>&);
  const std::pair<const char*, Main> commands[] = {
      {"run", run_main},       {"check", check_main},   {"list", list_main},
      {"diff", diff_main},     {"select", select_main}, {"history", history_main},
      {"report", report_main}, {"merge", merge_main},   {"package", package_main}};
  for (const auto& [name, command] : commands)
    if (cmd == name) return guarded(cmd, [&, command = command] { return command(args); });
  std::cerr << "command line: unknown command '" << cmd << "' (see scorer --help)\n";
  return kExitBadInput;
}
