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

const char* kIndexHeader = "# time\tcommit\tdirty\taggregate\tlo\thi\tfile\tevent\n";

[[noreturn]] void sys_fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

std::string read_file(const std::string& path, size_t max_bytes = kMaxResultsFileBytes) {
  return read_input_file(path, max_bytes, max_bytes == kMaxIndexFileBytes ? "a history index" : "a results file");
}

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) sys_fail(path);
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) sys_fail(path + ": fsync");
}

// Writes `data` to a name under `dir` that did not exist before (O_EXCL makes
// the claim atomic): base.json, else base-2.json, base-3.json...
std::string write_new_file(const std::string& dir, const std::string& base, const std::string& data) {
  for (int i = 1; i < 10000; ++i) {
    std::string name = base + (i == 1 ? "" : "-" + std::to_string(i)) + ".json";
    std::string path = dir + "/" + name;
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) sys_fail(path);
    try {
      write_all(fd, data, path);
      if (close(fd) != 0) sys_fail(path);
    } catch (...) {
      close(fd);
      unlink(path.c_str());  // no partial copy left to pass for an archived best
      throw;
    }
    return name;
  }
  throw std::runtime_error(dir + "/" + base + ".json: every suffixed name is taken");
}

void append_entry(const std::string& index, const HistoryEntry& e) {
  int fd = open(index.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) sys_fail(index);
  struct stat st;
  std::string line = (fstat(fd, &st) == 0 && st.st_size == 0) ? kIndexHeader : "";
  char nums[96];
  std::snprintf(nums, sizeof nums, "%.6f\t%.6f\t%.6f", e.aggregate, e.lo, e.hi);
  line += e.time + "\t" + e.commit + "\t" + (e.dirty ? "dirty" : "clean") + "\t" + nums + "\t" +
          e.file + "\t" + e.event + "\n";
  try {
    write_all(fd, line, index);
  } catch (...) {
    close(fd);
    throw;
  }
  if (close(fd) != 0) sys_fail(index);
}

// Keeps letters and digits only, so that a value can be part of a file name
// or a tab-separated field whatever it holds.
std::string alnum(const std::string& s) {
  std::string o;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c))) o += c;
  return o;
}

std::string one_field(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
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
  std::string time = alnum(m.started_at);
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
  std::snprintf(b, sizeof b, "aggregate %.4fx [%.4f, %.4f]", run.aggregate.point, run.aggregate.lo,
                run.aggregate.hi);
  std::string commit = run.meta.git_commit.empty() ? "no commit" : run.meta.git_commit.substr(0, 12);
  return std::string(b) + ", " + run.meta.started_at + ", " + commit + (run.meta.git_dirty ? " (dirty)" : "");
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
      throw InputError(where + ": field '" + names[std::min<size_t>(f.size(), 7)] + "': expected 8 tab-separated fields, got " +
                       std::to_string(f.size()));
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

int select_run(const std::string& run_path, const std::string& results_dir, std::ostream& out,
               std::ostream& err) {
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
    // The index says what happened only once it has: should the replace fail,
    // the old best stays best, its archived copy a spare the index never names.
    std::string name;
    if (had_best) name = write_new_file(history_dir, archive_base(old.meta), old_bytes);
    write_file_atomic(best_path, bytes);
    if (had_best) {
      append_entry(index, entry_of(old, "history/" + name, "retired"));
      out << "previous best (" << summary(old) << ") kept as " << history_dir << "/" << name << "\n";
    }
    append_entry(index, entry_of(run, "best.json", "selected"));
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
  return select_run(a.files.empty() ? a.results_dir + "/latest.json" : a.files[0], a.results_dir, std::cout,
                    std::cerr);
}

int history_main(const std::vector<std::string>& args) {
  ResultsDirArgs a;
  if (const int rc = parse_history_args(args, &a); rc != kGoOn) return rc;
  return print_history(a.results_dir, std::cout, std::cerr);
}

}  // namespace scorer
