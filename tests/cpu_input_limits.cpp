// Unbounded input (issue 35): shapes, results, recorded files and the history
// index are read only when regular files (a device or a FIFO is refused before
// a byte is read, and never hangs), and only up to their stated limits.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>

#include "scorer/command_line.h"
#include "scorer/commands.h"
#include "scorer/exit_codes.h"
#include "scorer/file_io.h"
#include "tests/command_output.h"
#include "tests/temp_dir.h"

using Outcome = test_util::CommandOutcome;
const auto call = test_util::call_command;

TEST_CASE("input limits: devices and FIFOs are refused at once, never read") {
  test_util::TempDir dir("cpu-input-limits");
  const std::string fifo = (dir.path / "fifo").string();
  REQUIRE(mkfifo(fifo.c_str(), 0644) == 0);
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& bad : {std::string("/dev/zero"), fifo}) {
    CAPTURE(bad);
    Outcome o = call(scorer::list_main, {"--shapes", bad});
    CHECK(o.rc == scorer::kExitBadInput);
    CHECK(o.err.find(bad + ": cannot read: ") == 0);
    CHECK(o.err.find("not a regular file") != std::string::npos);
    o = call(scorer::check_main, {"--shapes", bad});
    CHECK(o.rc == scorer::kExitBadInput);
    o = call(scorer::diff_main, {bad, bad});
    CHECK(o.rc == scorer::kExitBadInput);
    CHECK(o.err.find("not a regular file") != std::string::npos);
    o = call(scorer::report_main, {bad, "--out", (dir.path / "r.html").string()});
    CHECK(o.rc == scorer::kExitBadInput);
    o = call(scorer::select_main, {bad, "--results-dir", dir.path.string()});
    CHECK(o.rc == scorer::kExitBadInput);
    o = call(scorer::run_main, {"--recorded", bad});
    CHECK(o.rc == scorer::kExitBadInput);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("input limits: a file above its kind's limit is refused by its size") {
  test_util::TempDir dir("cpu-input-limits");
  const std::string big = dir.write("big.toml", std::string(scorer::kMaxShapesFileBytes + 1, '#'));
  Outcome o = call(scorer::list_main, {"--shapes", big});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == big + ": larger than 1 MiB, the most a shapes file may hold\n");
  // Exactly at the limit is read (and here fails for having no shape, not for its size).
  const std::string fits = dir.write("fits.toml", std::string(scorer::kMaxShapesFileBytes, '#'));
  o = call(scorer::list_main, {"--shapes", fits});
  CHECK(o.err.find("larger than") == std::string::npos);

  const std::string results = dir.write("huge.json", "");
  std::filesystem::resize_file(results, scorer::kMaxResultsFileBytes + 1);  // sparse: no disk used
  o = call(scorer::diff_main, {results, results});
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err == results + ": larger than 128 MiB, the most a results file may hold\n");
}

TEST_CASE("host memory: a shape whose routings exceed the host's limit is one line naming file, line and fields") {
  test_util::TempDir dir("cpu-input-limits");
  const std::string path = dir.write("huge.toml",
                                     "[[shape]]\nname = \"moe_huge\"\nop = \"moe_w4a16\"\nregime = \"moe\"\n"
                                     "M = 1000000\nH = 128\nI = 128\nE_global = 4000\nE_local = 4000\nk = 4000\n"
                                     "ep_rank = 0\n");
  const auto start = std::chrono::steady_clock::now();
  const Outcome o = call(scorer::list_main, {"--shapes", path});
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(o.rc == scorer::kExitBadInput);
  CHECK(o.err.rfind(path + ":1: fields M, k: shape 'moe_huge' takes ", 0) == 0);
  CHECK(o.err.find("GiB of host memory for its routings, more than the limit of 8.0 GiB") != std::string::npos);
  CHECK(o.err.find('\n') == o.err.size() - 1);
}

TEST_CASE("no exception ends a command: whatever escapes is one line and exit 2") {
  std::ostringstream err;
  std::streambuf* old = std::cerr.rdbuf(err.rdbuf());
  const int oom = scorer::guarded("list", []() -> int { throw std::bad_alloc(); });
  const int other = scorer::guarded("diff", []() -> int { throw std::runtime_error("odd\nthing"); });
  const int fine = scorer::guarded("select", [] { return 1; });
  std::cerr.rdbuf(old);
  CHECK(oom == scorer::kExitBadInput);
  CHECK(other == scorer::kExitBadInput);
  CHECK(fine == 1);
  CHECK(err.str() ==
        "scorer list: out of host memory (the input asks for more than this host has)\n"
        "scorer diff: odd\\nthing\n");
}
