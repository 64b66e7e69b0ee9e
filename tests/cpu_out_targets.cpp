// Writing over what it must not (issue 35): every --out refuses a target that
// is not a regular file and every file the results directory or the tree
// depends on (unless --force, for plain files); the one atomic writer never
// follows a planted link.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "scorer/commands.h"
#include "scorer/exit_codes.h"
#include "scorer/file_io.h"
#include "scorer/results_json.h"
#include "tests/command_output.h"
#include "tests/sample_run.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using Outcome = test_util::CommandOutcome;
const auto call = test_util::call_command;

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The current directory for a scope: the protected tree paths are relative to it.
struct InDir {
  fs::path old = fs::current_path();
  explicit InDir(const fs::path& p) { fs::current_path(p); }
  ~InDir() { fs::current_path(old); }
};

}  // namespace

TEST_CASE("out targets: no --out replaces a device, a directory, a FIFO or a link") {
  test_util::TempDir dir("cpu-out-targets");
  InDir in(dir.path);
  scorer::save_results(test_util::sample_run(1.2), "results/latest.json");
  REQUIRE(mkfifo("fifo", 0644) == 0);
  fs::create_directory("adir");
  dir.write("victim", "precious");
  fs::create_symlink(dir.path / "victim", "link");

  for (const std::string target : {"/dev/null", "fifo", "adir", "link"}) {
    CAPTURE(target);
    for (auto [command, args] :
         std::vector<std::pair<int (*)(const std::vector<std::string>&), std::vector<std::string>>>{
             {scorer::report_main, {"--out", target, "--force"}},
             {scorer::package_main, {"--out", target, "--force"}},
             {scorer::run_main, {"--out", target, "--force"}},
             {scorer::merge_main, {"results/latest.json", "--out", target, "--force"}}}) {
      const Outcome o = call(command, args);
      CHECK(o.rc == scorer::kExitBadInput);
      CHECK(o.err.rfind("command line: --out " + target + ": ", 0) == 0);
    }
  }
  struct stat st {};
  REQUIRE(stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  REQUIRE(lstat("fifo", &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(fs::is_symlink("link"));
  CHECK(read("victim") == "precious");
  // The writer itself refuses too, whoever calls it.
  CHECK_THROWS_WITH_AS(scorer::write_file_atomic("link", "x"), doctest::Contains("symbolic link"), std::runtime_error);
  CHECK_THROWS_AS(scorer::save_results(test_util::sample_run(1.2), "fifo"), std::runtime_error);
  CHECK(read("victim") == "precious");
}

TEST_CASE("out targets: the files the results and the tree depend on are refused unless --force") {
  test_util::TempDir dir("cpu-out-targets");
  InDir in(dir.path);
  scorer::save_results(test_util::sample_run(1.2), "results/latest.json");
  scorer::save_results(test_util::sample_run(1.1), "results/best.json");
  for (const char* f :
       {"results/history/index.tsv", "results/runs/a.json", "shapes.toml", "submission/dense.cu", "dev/dense.cu"})
    dir.write(f, "precious");
  const std::vector<std::string> protect = {
      "results/best.json", "results/latest.json", "results/history/index.tsv",    "results/runs/a.json",
      "shapes.toml",       "submission/dense.cu", "results/../submission/new.cu", "dev/dense.cu"};
  for (const std::string& target : protect) {
    CAPTURE(target);
    Outcome o = call(scorer::report_main, {"--out", target});
    CHECK(o.rc == scorer::kExitBadInput);
    CHECK(o.err.find("--force to write there") != std::string::npos);
    o = call(scorer::package_main, {"--out", target});
    CHECK(o.rc == scorer::kExitBadInput);
    CHECK(o.err.find("--force to write there") != std::string::npos);
  }
  // run writes the latest results, never the selected best, and nothing else protected.
  Outcome o = call(scorer::run_main, {"--out", "submission/x.json"});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err.find("would replace submission") != std::string::npos);
  o = call(scorer::run_main, {"--out", "results/best.json", "--force"});
  CHECK(o.err.find("which only scorer select replaces") != std::string::npos);
  o = call(scorer::merge_main, {"results/latest.json", "--out", "results/best.json", "--force"});
  CHECK(o.err.find("which only scorer select replaces") != std::string::npos);
  o = call(scorer::merge_main, {"results/latest.json", "--out", "shapes.toml"});
  CHECK(o.err.find("--force to write there") != std::string::npos);
  CHECK(read("submission/dense.cu") == "precious");
  CHECK(read("results/history/index.tsv") == "precious");

  // --force lets a plain protected file be replaced, by the atomic writer.
  o = call(scorer::report_main, {"--out", "results/runs/a.json", "--force"});
  CHECK(o.rc == scorer::kExitOk);
  CHECK(read("results/runs/a.json").rfind("<!doctype html>", 0) == 0);
  // An ordinary target is written without it.
  o = call(scorer::report_main, {"--out", "page.html"});
  CHECK(o.rc == scorer::kExitOk);
}

TEST_CASE("out targets: temporaries are exclusive, never a fixed name a link could be planted at") {
  test_util::TempDir dir("cpu-out-targets");
  const fs::path target = dir.path / "report.html";
  dir.write("victim", "precious");
  // The names the writers used before: a link there must not be followed.
  for (const std::string& planted : {std::string("report.html.tmp"), "report.html.tmp-" + std::to_string(getpid()),
                                     "report.html.tmp." + std::to_string(getpid())})
    fs::create_symlink(dir.path / "victim", dir.path / planted);
  scorer::write_file_atomic(target.string(), "page");
  CHECK(read(target) == "page");
  CHECK(read(dir.path / "victim") == "precious");
  size_t left = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) left += e.path().filename().string().rfind(".report", 0) == 0;
  CHECK(left == 0);  // no temporary left behind
}
