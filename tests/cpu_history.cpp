// scorer select / history: only passing runs are promoted, the previous best is
// kept under history/ and never overwritten, index.tsv logs every event, and
// bad input changes nothing.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "scorer/commands.h"
#include "scorer/exit_codes.h"
#include "scorer/history.h"
#include "scorer/results_json.h"
#include "scorer/stats.h"
#include "tests/sample_run.h"

namespace {

using namespace scorer;
namespace fs = std::filesystem;

RunResult make_run(double speedup, const std::string& started_at, const std::string& commit) {
  return test_util::sample_run(speedup, started_at, commit);
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "cpu_history-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& rel) const { return (path / rel).string(); }
};

std::string read(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write(const std::string& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

// Every file under `dir` with its bytes.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> m;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) m[fs::relative(e.path(), dir).string()] = read(e.path().string());
  return m;
}

struct Selected {
  int rc;
  std::string out, err;
};

Selected select(const TempDir& dir, const std::string& run_path) {
  std::ostringstream out, err;
  int rc = select_run(run_path, dir.path.string(), out, err);
  return {rc, out.str(), err.str()};
}

}  // namespace

TEST_CASE("select refuses a run that did not pass correctness and changes nothing") {
  TempDir dir;
  RunResult good = make_run(1.3, "2025-06-01T10:00:00Z", "aaaaaaaaaaaa");
  save_results(good, dir / "good.json");
  REQUIRE(select(dir, dir / "good.json").rc == kExitOk);
  const auto before = snapshot(dir.path);

  RunResult failed = make_run(2.0, "2025-06-02T10:00:00Z", "bbbbbbbbbbbb");
  failed.shapes[1].status = "incorrect";
  failed.shapes[1].reason = "rel_l2 0.2 > 0.01";
  compute_statistics(failed);
  save_results(failed, dir / "failed.json");
  auto before_failed = snapshot(dir.path);
  Selected s = select(dir, dir / "failed.json");
  CHECK(s.rc == kExitIncorrect);
  CHECK(s.err.find("dense_b is incorrect (rel_l2 0.2 > 0.01)") != std::string::npos);
  CHECK(snapshot(dir.path) == before_failed);

  // A run whose statuses are all ok but whose correctness flag is not.
  RunResult flagged = make_run(2.0, "2025-06-03T10:00:00Z", "cccccccccccc");
  flagged.correctness_passed = false;
  save_results(flagged, dir / "flagged.json");
  before_failed = snapshot(dir.path);
  s = select(dir, dir / "flagged.json");
  CHECK(s.rc == kExitBadInput);  // a file that contradicts itself
  CHECK(s.err.find("field 'correctness_passed': false, but 0 of the shapes") != std::string::npos);
  CHECK(snapshot(dir.path) == before_failed);
  CHECK(read(dir / "best.json") == read(dir / "good.json"));
  CHECK(before.count("best.json"));

  // A run stopped by Ctrl-C: every shape it has passed, but not every shape ran.
  RunResult partial = make_run(2.0, "2025-06-04T10:00:00Z", "dddddddddddd");
  partial.meta.interrupted = true;
  save_results(partial, dir / "partial.json");
  before_failed = snapshot(dir.path);
  s = select(dir, dir / "partial.json");
  CHECK(s.rc == kExitIncorrect);
  CHECK(s.err.find("it was interrupted after 3 shapes (a partial run)") != std::string::npos);
  CHECK(snapshot(dir.path) == before_failed);
}

TEST_CASE("select keeps the previous best in history and logs both in index.tsv") {
  TempDir dir;
  RunResult a = make_run(1.2, "2025-06-01T10:00:00Z", "1111111aaaa");
  RunResult b = make_run(1.5, "2025-06-02T11:30:00Z", "2222222bbbb");
  b.meta.git_dirty = true;
  save_results(a, dir / "a.json");
  save_results(b, dir / "b.json");

  Selected s = select(dir, dir / "a.json");
  REQUIRE(s.rc == kExitOk);
  CHECK(read(dir / "best.json") == read(dir / "a.json"));
  std::vector<HistoryEntry> h = load_history(dir.path.string());
  REQUIRE(h.size() == 1);
  CHECK(h[0].event == "selected");
  CHECK(h[0].time == "2025-06-01T10:00:00Z");

  s = select(dir, dir / "b.json");
  REQUIRE(s.rc == kExitOk);
  CHECK(read(dir / "best.json") == read(dir / "b.json"));
  const std::string kept = dir / "history/20250601T100000Z-1111111.json";
  REQUIRE(fs::exists(kept));
  CHECK(read(kept) == read(dir / "a.json"));

  h = load_history(dir.path.string());
  REQUIRE(h.size() == 3);
  CHECK(h[1].event == "retired");
  CHECK(h[1].file == "history/20250601T100000Z-1111111.json");
  CHECK(h[1].commit == "1111111aaaa");
  CHECK_FALSE(h[1].dirty);
  CHECK(h[1].aggregate == doctest::Approx(a.aggregate.point).epsilon(1e-5));
  CHECK(h[1].lo == doctest::Approx(a.aggregate.lo).epsilon(1e-5));
  CHECK(h[1].hi == doctest::Approx(a.aggregate.hi).epsilon(1e-5));
  CHECK(h[2].event == "selected");
  CHECK(h[2].file == "best.json");
  CHECK(h[2].dirty);
  CHECK(h[2].time == "2025-06-02T11:30:00Z");

  // Selecting the selected run again adds nothing.
  s = select(dir, dir / "best.json");
  CHECK(s.rc == kExitOk);
  CHECK(load_history(dir.path.string()).size() == 3);

  std::ostringstream out, err;
  CHECK(print_history(dir.path.string(), out, err) == kExitOk);
  const std::string table = out.str();
  CHECK(table.find("retired") != std::string::npos);
  CHECK(table.find("2025-06-02T11:30:00Z") != std::string::npos);
  CHECK(table.find("history/20250601T100000Z-1111111.json") != std::string::npos);
}

TEST_CASE("select never overwrites a file in history") {
  TempDir dir;
  // Three runs with the same time and commit: their archive names collide.
  RunResult a = make_run(1.1, "2025-06-01T10:00:00Z", "abcdef0123");
  RunResult b = make_run(1.2, "2025-06-01T10:00:00Z", "abcdef0123");
  RunResult c = make_run(1.3, "2025-06-01T10:00:00Z", "abcdef0123");
  save_results(a, dir / "a.json");
  save_results(b, dir / "b.json");
  save_results(c, dir / "c.json");
  fs::create_directories(dir / "history");
  write(dir / "history/20250601T100000Z-abcdef0.json", "already here\n");

  REQUIRE(select(dir, dir / "a.json").rc == kExitOk);
  REQUIRE(select(dir, dir / "b.json").rc == kExitOk);
  REQUIRE(select(dir, dir / "c.json").rc == kExitOk);
  CHECK(read(dir / "history/20250601T100000Z-abcdef0.json") == "already here\n");
  CHECK(read(dir / "history/20250601T100000Z-abcdef0-2.json") == read(dir / "a.json"));
  CHECK(read(dir / "history/20250601T100000Z-abcdef0-3.json") == read(dir / "b.json"));
  CHECK(read(dir / "best.json") == read(dir / "c.json"));
  std::vector<HistoryEntry> h = load_history(dir.path.string());
  REQUIRE(h.size() == 5);
  CHECK(h[1].file == "history/20250601T100000Z-abcdef0-2.json");
  CHECK(h[3].file == "history/20250601T100000Z-abcdef0-3.json");
}

TEST_CASE("select: a truncated run, best.json or index is one line with file and line, exit 2, nothing changed") {
  TempDir dir;
  RunResult a = make_run(1.2, "2025-06-01T10:00:00Z", "1111111");
  save_results(a, dir / "a.json");
  REQUIRE(select(dir, dir / "a.json").rc == kExitOk);
  const std::string text = read(dir / "a.json");
  const auto before = snapshot(dir.path);

  SUBCASE("truncated run") {
    write(dir / "latest.json", text.substr(0, text.size() / 2));
    const auto with_latest = snapshot(dir.path);
    std::string err;
    int rc;
    {
      std::ostringstream captured;
      std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
      rc = select_main({"--results-dir", dir.path.string()});
      std::cerr.rdbuf(old);
      err = captured.str();
    }
    CHECK(rc == kExitBadInput);
    CHECK(err.find('\n') == err.size() - 1);
    CHECK(err.rfind(dir / "latest.json" + ":", 0) == 0);
    CHECK(snapshot(dir.path) == with_latest);
  }
  SUBCASE("truncated best.json") {
    write(dir / "best.json", text.substr(0, text.size() - 10));
    const auto broken = snapshot(dir.path);
    Selected s = select(dir, dir / "a.json");
    CHECK(s.rc == kExitBadInput);
    CHECK(s.err.rfind(dir / "best.json" + ":", 0) == 0);
    CHECK(s.err.find('\n') == s.err.size() - 1);
    CHECK(snapshot(dir.path) == broken);
  }
  SUBCASE("malformed index.tsv") {
    RunResult b = make_run(1.4, "2025-06-02T10:00:00Z", "2222222");
    save_results(b, dir / "b.json");
    std::ofstream(dir / "history/index.tsv", std::ios::app) << "2025\tx\tclean\tfast\t1\t2\tf.json\tselected\n";
    const auto broken = snapshot(dir.path);
    Selected s = select(dir, dir / "b.json");
    CHECK(s.rc == kExitBadInput);
    CHECK(s.err == dir / "history/index.tsv" + ":3: field 'aggregate': not a number ('fast')\n");
    CHECK(snapshot(dir.path) == broken);
    std::ostringstream out, err;
    CHECK(print_history(dir.path.string(), out, err) == kExitBadInput);
  }
  CHECK(before.count("history/index.tsv"));
}

TEST_CASE("selects at the same time lose no run: each is best or in the history") {
  TempDir dir;
  constexpr int kRuns = 8;
  std::set<std::string> runs;
  for (int i = 0; i < kRuns; ++i) {
    const std::string path = dir / ("r" + std::to_string(i) + ".json");
    const std::string day = "2025-06-0" + std::to_string(i + 1) + "T10:00:00Z";
    save_results(make_run(1.1 + 0.1 * i, day, "c0ffee" + std::to_string(i)), path);
    runs.insert(read(path));
  }
  const std::string results = dir / "results";
  std::vector<pid_t> children;
  for (int i = 0; i < kRuns; ++i) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::ostringstream out, err;
      _exit(select_run(dir / ("r" + std::to_string(i) + ".json"), results, out, err));
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == kExitOk));
  }
  std::set<std::string> kept;
  for (const auto& [name, bytes] : snapshot(results))
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) kept.insert(bytes);
  CHECK(kept == runs);
  const std::vector<HistoryEntry> h = load_history(results);
  CHECK(std::count_if(h.begin(), h.end(), [](const HistoryEntry& e) { return e.event == "selected"; }) == kRuns);
  CHECK(std::count_if(h.begin(), h.end(), [](const HistoryEntry& e) { return e.event == "retired"; }) == kRuns - 1);
}

TEST_CASE("select is all or nothing: a failure at any step of its commit changes nothing") {
  TempDir dir;
  save_results(make_run(1.5, "2025-07-01T10:00:00Z", "aaaaaaaaaaaa"), dir / "first.json");
  REQUIRE(select(dir, dir / "first.json").rc == kExitOk);
  save_results(make_run(1.8, "2025-07-02T10:00:00Z", "bbbbbbbbbbbb"), dir / "second.json");
  const auto before = snapshot(dir.path);
  for (const char* step : {"archived", "prepared", "indexed"}) {
    CAPTURE(step);
    set_select_step_hook([&](const std::string& at) {
      if (at == step) throw std::runtime_error("injected failure at " + at);
    });
    const Selected s = select(dir, dir / "second.json");
    set_select_step_hook(nullptr);
    CHECK(s.rc == kExitBadInput);
    CHECK(s.err == std::string("scorer select: injected failure at ") + step + "\n");
    CHECK(snapshot(dir.path) == before);  // no new best, no archive, no index line, no temporary
  }
  // And then it goes through, once, with the history saying so.
  Selected s = select(dir, dir / "second.json");
  CHECK(s.rc == kExitOk);
  CHECK(read(dir / "best.json") == read(dir / "second.json"));
  CHECK(load_history(dir.path.string()).size() == 3);  // selected, retired, selected
  s = select(dir, dir / "second.json");
  CHECK(s.out.find("already the selected run") != std::string::npos);
}

TEST_CASE("select: a best with a very long started_at does not break later selects") {
  TempDir dir;
  save_results(make_run(1.5, std::string(5000, '7'), "aaaaaaaaaaaa"), dir / "long.json");
  REQUIRE(select(dir, dir / "long.json").rc == kExitOk);
  save_results(make_run(1.8, "2025-07-02T10:00:00Z", "bbbbbbbbbbbb"), dir / "next.json");
  const Selected s = select(dir, dir / "next.json");
  CHECK_MESSAGE(s.rc == kExitOk, s.err);
  CHECK(fs::exists(dir / ("history/" + std::string(32, '7') + "-aaaaaaa.json")));
  CHECK(load_history(dir.path.string()).size() == 3);
}
