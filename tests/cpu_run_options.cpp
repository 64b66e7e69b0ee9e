// `scorer run` and `scorer list` refuse bad options with one line and exit 2
// before any GPU work (so these run without a GPU).
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "scorer/commands.h"
#include "scorer/exit_codes.h"
#include "tests/command_output.h"

namespace {

namespace fs = std::filesystem;

using Outcome = test_util::CommandOutcome;
const auto call = test_util::call_command;

}  // namespace

TEST_CASE("run: a results file it could not write is refused before any shape is scored") {
  const fs::path dir = fs::temp_directory_path() / ("scorer-run-options-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "results");
  const std::string d = dir.string();

  Outcome o = call(scorer::run_main, {"--out", d});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: --out " + d + ": is a directory, not a file to write\n");

  std::ofstream(dir / "file") << "x";
  o = call(scorer::run_main, {"--out", d + "/file/latest.json"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: --out " + d + "/file/latest.json: " + d + "/file is not a directory\n");

  // The selected best is replaced only by `scorer select`, under any spelling.
  o = call(scorer::run_main, {"--best", d + "/results/best.json", "--out", d + "/results/../results/best.json"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: --out " + d +
                     "/results/../results/best.json: is the selected best (--best), which only scorer select "
                     "replaces\n");
  fs::remove_all(dir);
}

TEST_CASE("run and list: seeds and counts are whole numbers; every option has its value, once") {
  Outcome o = call(scorer::run_main, {"--seed", "1.5"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: --seed: expected a whole number, got '1.5'\n");
  o = call(scorer::run_main, {"--sets", "2.5"});
  CHECK(o.err == "command line: --sets: expected a whole number, got '2.5'\n");
  o = call(scorer::run_main, {"--min-trials", "-3"});
  CHECK(o.err == "command line: --min-trials: expected a number in [1, 1e+06], got '-3'\n");

  o = call(scorer::run_main, {"--shapes", "a.toml", "--shapes", "b.toml"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: --shapes given twice\n");
  o = call(scorer::run_main, {"--variant", "dense=simt", "--variant", "dense=cublaslt"});
  CHECK(o.err == "command line: --variant: op dense given twice\n");

  o = call(scorer::list_main, {"--seed", "abc"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: --seed: expected a number in [0, 9e+15], got 'abc'\n");
  o = call(scorer::list_main, {"--seed", "99999999999999999999999"});
  CHECK(o.rc == scorer::kExitBadInput);
  o = call(scorer::list_main, {"--seed", "12abc"});
  CHECK(o.rc == scorer::kExitBadInput);
  o = call(scorer::list_main, {"--seed"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: --seed needs a value\n");
  o = call(scorer::list_main, {"--shapes"});
  CHECK(o.err == "command line: --shapes needs a value\n");
  o = call(scorer::list_main, {"--colour"});
  CHECK(o.err == "command line: unexpected argument '--colour' (see scorer list --help)\n");
}

TEST_CASE("run: --baseline OP=NAME names one of the op's baselines, once per op") {
  Outcome o = call(scorer::run_main, {"--baseline", "moe=grouped"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err ==
        "command line: --baseline: op moe_w4a16 has no baseline 'grouped' (known: cublas_batched, "
        "cublas_grouped_sync)\n");
  o = call(scorer::run_main, {"--baseline", "moe=cublas_grouped_sync", "--baseline", "moe_w4a16=default"});
  CHECK(o.err == "command line: --baseline: op moe_w4a16 given twice\n");
  o = call(scorer::run_main, {"--baseline", "conv=x"});
  CHECK(o.err == "command line: --baseline: unknown op 'conv' (pooler, dense, router, moe_w4a16)\n");
  o = call(scorer::run_main, {"--baseline", "dense"});
  CHECK(o.err == "command line: --baseline: expected OP=NAME, got 'dense'\n");
  // A valid choice gets past the options (and here stops at the missing shapes file).
  o = call(scorer::run_main,
           {"--baseline", "moe=cublas_grouped_sync", "--baseline", "dense=cublaslt", "--shapes", "no-such.toml"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err.rfind("no-such.toml: cannot read", 0) == 0);
}

TEST_CASE("every subcommand: one option layer, with the same help, errors and repeated-option rule") {
  using Main = int (*)(const std::vector<std::string>&);
  const std::vector<std::pair<std::string, Main>> commands = {
      {"run", scorer::run_main},       {"check", scorer::check_main},     {"list", scorer::list_main},
      {"diff", scorer::diff_main},     {"select", scorer::select_main},   {"history", scorer::history_main},
      {"report", scorer::report_main}, {"package", scorer::package_main}, {"merge", scorer::merge_main}};
  for (const auto& [name, command] : commands) {
    CAPTURE(name);
    Outcome o = call(command, {"--help"});
    CHECK(o.rc == scorer::kExitOk);
    CHECK(o.err.empty());
    CHECK(o.out.find("-h,--help") != std::string::npos);
    CHECK(o.out.find("exit codes:") != std::string::npos);

    o = call(command, {"--no-such-option"});
    CHECK(o.rc == scorer::kExitBadInput);
    CHECK(o.out.empty());
    CHECK(o.err == "command line: unexpected argument '--no-such-option' (see scorer " + name + " --help)\n");

    // An option that takes one value, given twice: refused, never the last one silently.
    const std::string once = name == "run" || name == "check" || name == "list" ? "--shapes"
                             : name == "package" || name == "merge"             ? "--out"
                                                                                : "--results-dir";
    o = call(command, {once, "a", once, "b"});
    CHECK(o.rc == scorer::kExitBadInput);
    CHECK(o.err == "command line: " + once + " given twice\n");
    o = call(command, {once});
    CHECK(o.rc == scorer::kExitBadInput);
    CHECK(o.err == "command line: " + once + " needs a value\n");
  }
  // A flag given twice is a mistake too.
  Outcome o = call(scorer::diff_main, {"--force", "--force"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: --force given twice\n");
  o = call(scorer::select_main, {"a.json", "b.json"});
  CHECK(o.err == "command line: unexpected argument 'b.json' (see scorer select --help)\n");
}

TEST_CASE("run: --filter '' is an error, not every shape") {
  Outcome o = call(scorer::run_main, {"--filter", ""});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: --filter: an empty glob matches no shape\n");
  o = call(scorer::check_main, {"--filter", "dense_*,"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == "command line: --filter: an empty glob in 'dense_*,'\n");
}
