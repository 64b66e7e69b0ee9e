#include "scorer/history.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "scorer/command_line.h"
#include "scorer/commands.h"
#include "scorer/exit_codes.h"
#include "scorer/file_io.h"
#include "scorer/results_json.h"

namespace scorer {
namespace {

namespace fs = std::filesystem;

std::function<void(const std::string&)> g_select_step;

void select_step(const std::string& step) {
  if (g_select_step) g_select_step(step);
}

const char* kIndexHeader = "# time\tcommit\tdirty\taggregate\tlo\thi\tfile\tevent\n";

[[noreturn]] void sys_fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

std::string read_file(const std::string& path, size_t max_bytes = kMaxResultsFileBytes) {
  return read_input_file(path, max_bytes, max_bytes == kMaxIndexFileBytes ? "a history index" : "a results file");
}

// One index line; its fields hold no tab or newline (one_field).
std::string entry_line(const HistoryEntry& e) {
  char nums[96];
  std::snprintf(nums, sizeof nums, "%.6f\t%.6f\t%.6f", e.aggregate, e.lo, e.hi);
  return e.time + "\t" + e.commit + "\t" + (e.dirty ? "dirty" : "clean") + "\t" + nums + "\t" + e.file + "\t" +
         e.event + "\n";
}

// Gives the prepared temporary `tmp` a name under `dir` that did not exist
// before (link() fails rather than replace): base.json, else base-2.json,
// base-3.json...; returns the name.
std::string link_new_name(const std::string& tmp, const std::string& dir, const std::string& base) {
  for (int i = 1; i < 10000; ++i) {
    const std::string name = base + (i == 1 ? "" : "-" + std::to_string(i)) + ".json";
    if (link(tmp.c_str(), (dir + "/" + name).c_str()) == 0) return name;
    if (errno != EEXIST) sys_fail(dir + "/" + name);
  }
  throw std::runtime_error(dir + "/" + base + ".json: every suffixed name is taken");
}

// Keeps letters and digits only, so that a value can be part of a file name
// or a tab-separated field whatever it holds.
std::string alnum(const std::string& s) {
  std::string o;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c))) o += c;
  return o;
}

// A field of the index: no tab or newline, at most 64 characters (a forged
// started_at of any length must not make the index or a file name unusable).
std::string one_field(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  if (s.size() > 64) s = s.substr(0, 64);
  return s.empty() ? "-" : s;
}

HistoryEntry entry_of(const RunResult& run, const std::string& file, const std::string& event) {
  HistoryEntry e;
  e.time = one_field(run.meta.started_at);
  e.commit = one_field(run.meta.git_commit);
  e.dirty = run.meta.git_dirty;
  e.aggregate = run.aggregate.point;
  e.lo = run.aggregate.lo;
  e.hi = run.aggregate.hi;
  e.file = file;
  e.event = event;
  return e;
}

// <UTC time>-<short commit> of a run, e.g. 20250102T030405Z-1a2b3c4.
std::string archive_base(const RunMeta& m) {
  std::string time = alnum(m.started_at).substr(0, 32);
  if (time.empty()) {
    char b[32];
    std::time_t now = std::time(nullptr);
    std::tm tm;
    gmtime_r(&now, &tm);
    std::strftime(b, sizeof b, "%Y%m%dT%H%M%SZ", &tm);
    time = b;
  }
  std::string commit = alnum(m.git_commit).substr(0, 7);
  return time + "-" + (commit.empty() ? "nocommit" : commit);
}

std::string summary(const RunResult& run) {
  char b[128];
  std::snprintf(b, sizeof b, "aggregate %.4fx [%.4f, %.4f]", run.aggregate.point, run.aggregate.lo, run.aggregate.hi);
  std::string commit = run.meta.git_commit.empty() ? "no commit" : run.meta.git_commit.substr(0, 12);
  return std::string(b) + ", " + one_field(run.meta.started_at) + ", " + commit +
         (run.meta.git_dirty ? " (dirty)" : "");
}

double number_field(const std::string& s, const std::string& where, const char* field) {
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  throw InputError(where + ": field '" + field + "': not a number ('" + s + "')");
}

}  // namespace

void set_select_step_hook(std::function<void(const std::string&)> hook) { g_select_step = std::move(hook); }

std::vector<HistoryEntry> load_history(const std::string& results_dir) {
  const std::string path = results_dir + "/history/index.tsv";
  std::vector<HistoryEntry> out;
  if (!fs::exists(path)) return out;
  std::istringstream in(read_file(path, kMaxIndexFileBytes));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::string cell;
    std::istringstream cells(line);
    while (std::getline(cells, cell, '\t')) f.push_back(cell);
    const std::string where = path + ":" + std::to_string(n);
    static const char* names[] = {"time", "commit", "dirty", "aggregate", "lo", "hi", "file", "event"};
    if (f.size() != 8)
      throw InputError(where + ": field '" + names[std::min<size_t>(f.size(), 7)] +
                       "': expected 8 tab-separated fields, got " + std::to_string(f.size()));
    HistoryEntry e;
    e.line = n;
    e.time = f[0];
    e.commit = f[1];
    if (f[2] != "dirty" && f[2] != "clean")
      throw InputError(where + ": field 'dirty': expected 'dirty' or 'clean' (got '" + f[2] + "')");
    e.dirty = f[2] == "dirty";
    e.aggregate = number_field(f[3], where, "aggregate");
    e.lo = number_field(f[4], where, "lo");
    e.hi = number_field(f[5], where, "hi");
    e.file = f[6];
    if (f[7] != "selected" && f[7] != "retired")
      throw InputError(where + ": field 'event': expected 'selected' or 'retired' (got '" + f[7] + "')");
    e.event = f[7];
    out.push_back(e);
  }
  return out;
}

// Holds an exclusive lock on a directory while it lives: two selects at once
// would otherwise both archive the same previous best and one new best would
// be lost.
class DirLock {
 public:
  explicit DirLock(const std::string& dir) : fd_(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ < 0) sys_fail(dir);
    while (flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) {
        const int e = errno;
        close(fd_);
        errno = e;
        sys_fail(dir + ": lock");
      }
  }
  ~DirLock() { close(fd_); }  // releases the lock
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_;
};

int select_run(const std::string& run_path, const std::string& results_dir, std::ostream& out, std::ostream& err) {
  const std::string best_path = results_dir + "/best.json";
  const std::string history_dir = results_dir + "/history";
  try {
    // The bytes checked are the bytes copied, even if the file is replaced meanwhile.
    const std::string bytes = read_file(run_path);
    RunResult run = parse_results(bytes, run_path);
    std::string why;
    if (run.shapes.empty()) why = "it scored no shape";
    if (run.meta.interrupted && why.empty())
      why = "it was interrupted after " + std::to_string(run.shapes.size()) + " shapes (a partial run)";
    for (const ShapeResult& s : run.shapes)
      if (s.status != "ok" && why.empty())
        why = "shape " + s.shape.name + " is " + s.status + (s.reason.empty() ? "" : " (" + s.reason + ")");
    if (why.empty() && !run.correctness_passed) why = "it did not pass correctness";
    if (!why.empty()) {
      err << "scorer select: not selecting " << run_path << ": " << why << "\n";
      return kExitIncorrect;
    }

    // Everything that is read is validated before anything is written, and
    // under the lock nothing else writes.
    fs::create_directories(results_dir);
    const DirLock lock(results_dir);
    load_history(results_dir);
    bool had_best = fs::exists(best_path);
    std::string old_bytes;
    RunResult old;
    if (had_best) {
      old_bytes = read_file(best_path);
      if (old_bytes == bytes) {
        out << run_path << " is already the selected run (" << best_path << ")\n";
        return kExitOk;
      }
      old = parse_results(old_bytes, best_path);
    }

    fs::create_directories(history_dir);
    const std::string index = history_dir + "/index.tsv";
    const bool had_index = fs::exists(index);
    const std::string old_index = had_index ? read_file(index, kMaxIndexFileBytes) : "";

    // All or nothing: every new file is prepared as a temporary first; the
    // commit is a link (the archived copy, under a name never taken) and two
    // renames (the index, then the best); a failure rolls back what was done.
    std::vector<std::string> temporaries;
    std::string archived, name;
    bool index_replaced = false;
    try {
      const std::string best_tmp = write_temp_file(results_dir, "best.json", bytes);
      temporaries.push_back(best_tmp);
      if (had_best) {
        temporaries.push_back(write_temp_file(history_dir, "archive", old_bytes));
        name = link_new_name(temporaries.back(), history_dir, archive_base(old.meta));
        archived = history_dir + "/" + name;
      }
      select_step("archived");
      std::string new_index = old_index.empty() ? kIndexHeader : old_index;
      if (!new_index.empty() && new_index.back() != '\n') new_index += "\n";
      if (had_best) new_index += entry_line(entry_of(old, "history/" + name, "retired"));
      new_index += entry_line(entry_of(run, "best.json", "selected"));
      temporaries.push_back(write_temp_file(history_dir, "index.tsv", new_index));
      select_step("prepared");
      if (rename(temporaries.back().c_str(), index.c_str()) != 0) sys_fail(index);
      index_replaced = true;
      select_step("indexed");
      require_regular_or_absent(best_path);
      if (rename(best_tmp.c_str(), best_path.c_str()) != 0) sys_fail(best_path);
    } catch (...) {
      if (index_replaced) {
        if (had_index)
          write_file_atomic(index, old_index);
        else
          unlink(index.c_str());
      }
      if (!archived.empty()) unlink(archived.c_str());
      for (const std::string& t : temporaries) unlink(t.c_str());
      throw;
    }
    for (const std::string& t : temporaries) unlink(t.c_str());  // the renamed ones are gone already
    if (had_best) out << "previous best (" << summary(old) << ") kept as " << history_dir << "/" << name << "\n";
    out << "selected " << run_path << " as " << best_path << ": " << summary(run) << "\n";
    return kExitOk;
  } catch (const InputError& e) {
    err << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    err << "scorer select: " << e.what() << "\n";
    return kExitBadInput;
  }
}

int print_history(const std::string& results_dir, std::ostream& out, std::ostream& err) {
  try {
    const std::string best_path = results_dir + "/best.json";
    if (fs::exists(best_path))
      out << "selected: " << best_path << ": " << summary(load_results(best_path)) << "\n";
    else
      out << "selected: none (" << best_path << " does not exist)\n";
    std::vector<HistoryEntry> h = load_history(results_dir);
    if (h.empty()) {
      out << "no history yet (" << results_dir << "/history/index.tsv)\n";
      return kExitOk;
    }
    const std::vector<std::string> head = {"time", "commit", "dirty", "aggregate", "95% interval", "event", "file"};
    std::vector<std::vector<std::string>> rows = {head};
    for (const HistoryEntry& e : h) {
      char agg[32], ci[64];
      std::snprintf(agg, sizeof agg, "%.4fx", e.aggregate);
      std::snprintf(ci, sizeof ci, "[%.4f, %.4f]", e.lo, e.hi);
      rows.push_back({e.time, e.commit.substr(0, 12), e.dirty ? "dirty" : "clean", agg, ci, e.event, e.file});
    }
    std::vector<size_t> w(head.size(), 0);
    for (const auto& r : rows)
      for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
    for (const auto& r : rows) {
      std::string line;
      for (size_t i = 0; i < r.size(); ++i)
        line += r[i] + (i + 1 < r.size() ? std::string(w[i] - r[i].size() + 2, ' ') : "");
      out << line << "\n";
    }
    return kExitOk;
  } catch (const InputError& e) {
    err << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    err << "scorer history: " << e.what() << "\n";
    return kExitBadInput;
  }
}

int select_main(const std::vector<std::string>& args) {
  ResultsDirArgs a;
  if (const int rc = parse_select_args(args, &a); rc != kGoOn) return rc;
  return select_run(a.files.empty() ? a.results_dir + "/latest.json" : a.files[0], a.results_dir, std::cout, std::cerr);
}

int history_main(const std::vector<std::string>& args) {
  ResultsDirArgs a;
  if (const int rc = parse_history_args(args, &a); rc != kGoOn) return rc;
  return print_history(a.results_dir, std::cout, std::cerr);
}

}  // namespace scorer
