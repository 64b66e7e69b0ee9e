#include "scorer/out_target.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "scorer/command_line.h"
#include "scorer/shapes.h"

namespace scorer {
namespace {

namespace fs = std::filesystem;

fs::path resolved(const std::string& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  const fs::path c = fs::weakly_canonical(a, ec);
  return ec ? a.lexically_normal() : c;
}

// True when `target` is `p` or lies under it.
bool within(const fs::path& target, const fs::path& p) {
  auto t = target.begin(), q = p.begin();
  for (; q != p.end() && !q->empty(); ++q, ++t)
    if (t == target.end() || *t != *q) return false;
  return true;
}

}  // namespace

void check_out_target(const OutTarget& t) {
  const std::string head = "command line: " + t.flag + " " + printable(t.path) + ": ";
  struct stat st {};
  if (lstat(t.path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw UsageError(head + "is a directory, not a file to write");
    if (S_ISLNK(st.st_mode)) throw UsageError(head + "is a symbolic link, not a regular file: not replaced");
    if (!S_ISREG(st.st_mode)) throw UsageError(head + "is not a regular file (a device, FIFO or socket): not replaced");
  }
  // The nearest existing ancestor of its directory must be a writable directory.
  std::error_code ec;
  fs::path dir = fs::absolute(t.path, ec).parent_path();
  while (!fs::exists(dir, ec) && dir != dir.root_path()) dir = dir.parent_path();
  if (!fs::is_directory(dir, ec)) throw UsageError(head + dir.string() + " is not a directory");
  if (access(dir.c_str(), W_OK) != 0)
    throw UsageError(head + "cannot write in " + dir.string() + ": " + std::strerror(errno));

  const fs::path target = resolved(t.path);
  for (const std::string& n : t.never)
    if (target == resolved(n)) throw UsageError(head + t.never_why);
  if (t.force) return;
  const fs::path results = fs::path(t.results_dir);
  std::vector<std::pair<fs::path, std::string>> protect = {
      {results / "best.json", "the selected best"},
      {results / "latest.json", "the latest results"},
      {results / "history", "the history of selected runs"},
      {results / "runs", "the kept runs"},
  };
  for (const std::string& in : t.inputs) protect.push_back({in, "an input of this command"});
  for (const char* tree : {"shapes.toml", "shapes", "submission", "dev", "reference", "scorer", "baselines", "tests",
                           "scripts", "docs", ".ci", ".git", "Makefile", "README.md", "CONTRIBUTING.md"})
    protect.push_back({tree, "part of the tree"});
  for (const auto& [p, what] : protect)
    if (!p.empty() && within(target, resolved(p.string())))
      throw UsageError(head + "would replace " + printable(p.string()) + " (" + what + "); --force to write there");
}

void check_results_target(const std::string& out, const std::string& best, bool force,
                          const std::vector<std::string>& inputs) {
  OutTarget t;
  t.path = out;
  t.inputs = inputs;
  t.results_dir = fs::path(best).parent_path().string();
  if (t.results_dir.empty()) t.results_dir = ".";
  t.never = {best};
  t.never_why = "is the selected best (--best), which only scorer select replaces";
  t.force = force;
  // run's default target is the latest results, the one protected file it writes.
  if (resolved(out) == resolved((fs::path(t.results_dir) / "latest.json").string())) t.force = true;

  check_out_target(t);
}

}  // namespace scorer
