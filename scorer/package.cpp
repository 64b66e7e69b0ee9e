#include "scorer/package.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "scorer/child_process.h"
#include "scorer/command_line.h"
#include "scorer/commands.h"
#include "scorer/exit_codes.h"
#include "scorer/file_io.h"
#include "scorer/results_json.h"
#include "scorer/sha256.h"

namespace scorer {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void sys_fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + std::strerror(err));
}

using Proc = CommandResult;

std::string last_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

Proc must_run(const std::vector<std::string>& argv, const std::string& cwd, int stdout_fd = -1) {
  Proc p = run_command(argv, cwd, stdout_fd);
  if (!p.ok) throw std::runtime_error(argv[0] + " " + argv[1] + " failed: " + last_line(p.err));
  return p;
}

// A fresh directory under the system's temporary directory, removed with
// everything in it on scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "scorer-package-XXXXXX").string();
    if (!mkdtemp(t.data())) sys_fail("mkdtemp", errno);
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

bool in_git_checkout(const std::string& root) {
  return run_command({"git", "rev-parse", "--is-inside-work-tree"}, root).ok;
}

std::string fmt_interval(double point, double lo, double hi) {
  char b[96];
  std::snprintf(b, sizeof b, "%.4fx [%.4f, %.4f]", point, lo, hi);
  return b;
}

struct Manifest {
  std::vector<std::pair<std::string, std::string>> fields;  // in file order
  std::vector<std::pair<std::string, std::string>> files;   // path -> sha256
  std::string files_text;                                   // the sha256sum lines
  std::string get(const std::string& key) const {
    for (const auto& [k, v] : fields)
      if (k == key) return v;
    return "";
  }
};

// Throws std::runtime_error naming the MANIFEST line at fault.
Manifest parse_manifest(const std::string& text) {
  Manifest m;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  bool in_files = false;
  while (std::getline(in, line)) {
    ++n;
    const std::string where = "MANIFEST:" + std::to_string(n) + ": ";
    if (!in_files) {
      if (line.empty()) {
        in_files = true;
      } else if (line[0] != '#') {
        size_t c = line.find(": ");
        if (c == std::string::npos) throw std::runtime_error(where + "expected 'key: value'");
        m.fields.emplace_back(line.substr(0, c), line.substr(c + 2));
      }
      continue;
    }
    bool hex = line.size() > 66 && line.compare(64, 2, "  ") == 0 &&
               std::all_of(line.begin(), line.begin() + 64,
                           [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
    if (!hex) throw std::runtime_error(where + "expected '<sha256>  <path>'");
    std::string path = line.substr(66);
    bool escapes = false;
    for (const fs::path& part : fs::path(path)) escapes = escapes || part == "..";
    if (path.rfind("submission/", 0) != 0 || escapes)
      throw std::runtime_error(where + "path '" + path + "' is not under submission/");
    m.files.emplace_back(path, line.substr(0, 64));
    m.files_text += line + "\n";
  }
  if (!in_files) throw std::runtime_error("MANIFEST: no blank line before the file list");
  return m;
}

// Why a package needs --force ("" when it does not): what the MANIFEST's
// `forced:` line says, and what --verify expects it to say.
std::string forced_reason(bool have_best, const std::string& run_sha256, const std::string& tree_hash) {
  if (!have_best) return "no selected best";
  if (run_sha256 != tree_hash)
    return "the selected best was scored with submission " + run_sha256 + ", not with this one (" + tree_hash + ")";
  return "";
}

// A file whose path, links resolved, leaves submission/ (a symbolic link to
// the user's home, say) would put that file's bytes in the upload.
void refuse_links_out(const std::string& root, const std::vector<std::string>& files) {
  std::error_code ec;
  const fs::path tree = fs::weakly_canonical(fs::absolute(fs::path(root) / "submission"), ec);
  for (const std::string& f : files) {
    const fs::path real = fs::weakly_canonical(fs::absolute(fs::path(root) / f), ec);
    auto t = tree.begin(), r = real.begin();
    while (t != tree.end() && r != real.end() && *t == *r) ++t, ++r;
    if (t != tree.end() || ec)
      throw InputError(printable(root + "/" + f) + ": a symbolic link to " + printable(real.string()) +
                       ", which leaves submission/: not packaged (copy the file in instead)");
  }
}

// Limits of what --verify reads and extracts.
constexpr uintmax_t kMaxTarballBytes = uintmax_t(16) << 20;
constexpr size_t kMaxMembers = 4096;
constexpr uintmax_t kMaxExtractedBytes = uintmax_t(64) << 20;

// What a tarball may hold before it is extracted, from tar's listing: only
// regular files and directories (no link of either kind, no device), each name
// once, at most kMaxMembers of them and kMaxExtractedBytes in all. Returns
// the reason it may not, or "".
std::string check_listing(const std::string& listing) {
  std::istringstream in(listing);
  std::set<std::string> names;
  uintmax_t total = 0;
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (++n > kMaxMembers) return "more than " + std::to_string(kMaxMembers) + " members";
    // "-rw-r--r-- 0/0 123 1970-01-01 00:00 submission/a.cu" (names escaped: one line each)
    std::istringstream f(line);
    std::string mode, owner, size, date, time, name;
    f >> mode >> owner >> size >> date >> time;
    std::getline(f, name);
    if (!name.empty() && name[0] == ' ') name.erase(0, 1);
    if (!mode.empty() && mode[0] == 'd') continue;  // a directory holds nothing by itself
    if (mode.empty() || mode[0] != '-') {
      const size_t arrow = name.find(mode[0] == 'h' ? " link to " : " -> ");
      return printable(name.substr(0, arrow)) + " is " +
             (mode[0] == 'l'   ? "a symbolic link"
              : mode[0] == 'h' ? "a hard link"
                               : "not a regular file") +
             ", which a package never holds";
    }
    total += std::strtoull(size.c_str(), nullptr, 10);
    if (total > kMaxExtractedBytes) return "more than " + std::to_string(kMaxExtractedBytes >> 20) + " MiB in all";
    if (!names.insert(name).second) return printable(name) + " is in the tarball twice";
  }
  return "";
}

// SIGINT and SIGTERM, while it lives, only set a flag, so that --verify can
// remove its extraction before it exits; the former handlers come back after.
class StopSignals {
 public:
  StopSignals() {
    flag() = 0;
    struct sigaction sa {};
    sa.sa_handler = [](int) { flag() = 1; };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  bool stopped() const { return flag() != 0; }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static volatile sig_atomic_t& flag() {
    static volatile sig_atomic_t f = 0;
    return f;
  }
  struct sigaction old_int_ {
  }, old_term_{};
};

}  // namespace

std::vector<std::string> submission_files(const std::string& root) {
  std::vector<std::string> files;
  if (!fs::is_directory(fs::path(root) / "submission")) throw InputError(root + "/submission: no such directory");
  if (in_git_checkout(root)) {
    // The list scripts/tree-hash hashes: `git ls-files` then `[ -f ]`, which
    // follows symbolic links (so does tar --dereference below).
    Proc p =
        must_run({"git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "submission"}, root);
    std::istringstream in(p.out);
    for (std::string f; std::getline(in, f, '\0');)
      if (!f.empty() && fs::is_regular_file(fs::path(root) / f)) files.push_back(f);
  } else {
    // `find -type f`: the entry itself must be a regular file.
    for (const auto& e : fs::recursive_directory_iterator(fs::path(root) / "submission"))
      if (e.symlink_status().type() == fs::file_type::regular)
        files.push_back(fs::relative(e.path(), root).generic_string());
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  refuse_links_out(root, files);
  // sha256sum writes such a name escaped, behind a backslash: the MANIFEST's
  // plain list and the submission hash would disagree about it.
  for (const std::string& f : files)
    if (f.find_first_of("\\\n") != std::string::npos)
      throw InputError(root + "/" + printable(f) +
                       ": a file name with a backslash or a newline cannot be packaged; rename it");
  return files;
}

int build_package(const PackageOptions& opt, std::ostream& out, std::ostream& err) {
  try {
    const std::string out_path = opt.out.empty() ? opt.results_dir + "/submission.tar.gz" : opt.out;
    std::vector<std::string> files = submission_files(opt.root);
    if (files.empty()) throw InputError(opt.root + "/submission: no files to package");

    std::string files_text;
    for (const std::string& f : files) files_text += sha256_file((fs::path(opt.root) / f).string()) + "  " + f + "\n";
    const std::string tree_hash = last_line(must_run({"scripts/tree-hash", "submission"}, opt.root).out);
    // The MANIFEST's list must be the one the submission hash covers.
    if (sha256_string(files_text) != tree_hash)
      throw std::runtime_error("the file list differs from the one scripts/tree-hash hashes (" + tree_hash + ")");

    const std::string best_path = opt.results_dir + "/best.json";
    RunResult best;
    const bool have_best = fs::exists(best_path);
    if (have_best) best = load_results(best_path);
    const std::string forced = forced_reason(have_best, best.meta.submission_sha256, tree_hash);
    if (!forced.empty() && !opt.force) {
      err << "scorer package: refusing: " << forced << " (" << best_path
          << "); score and select this submission first (make score; scorer select), or --force\n";
      return kExitIncorrect;
    }

    std::string commit = "none", dirty = "unknown (not a git checkout)";
    if (in_git_checkout(opt.root)) {
      Proc head = run_command({"git", "rev-parse", "--verify", "-q", "HEAD"}, opt.root);
      if (head.ok) commit = last_line(head.out);
      dirty = must_run({"git", "status", "--porcelain"}, opt.root).out.empty() ? "no" : "yes";
    }
    std::string m =
        "# Submission package: every file of submission/ with its sha256 (after the blank line, in\n"
        "# sha256sum's format; their sha256 is submission_sha256), and the scored run it was selected with.\n";
    m += "submission_sha256: " + tree_hash + "\n";
    m += "git_commit: " + commit + "\n";
    m += "git_dirty: " + dirty + "\n";
    m += std::string("selected_run: ") + (have_best ? "yes" : "none") + "\n";
    if (!forced.empty()) m += "forced: " + forced + "\n";
    if (have_best) {
      m += "run_gpu: " + best.meta.gpu_name + "\n";
      m += "run_started_at: " + best.meta.started_at + "\n";
      m += "run_git_commit: " + best.meta.git_commit + (best.meta.git_dirty ? " (dirty)" : "") + "\n";
      m += "run_submission_sha256: " + best.meta.submission_sha256 + "\n";
      m += "run_mode: " + best.meta.mode + "\n";
      m += "run_aggregate: " + fmt_interval(best.aggregate.point, best.aggregate.lo, best.aggregate.hi) + "\n";
      for (const RegimeResult& r : best.regimes)
        m += "run_regime: " + r.name + " " + fmt_interval(r.speedup.point, r.speedup.lo, r.speedup.hi) + "\n";
    }
    m += "\n" + files_text;

    TempDir tmp;
    {
      std::ofstream f(tmp.path + "/MANIFEST", std::ios::binary);
      f << m;
      if (!f.flush()) throw std::runtime_error(tmp.path + "/MANIFEST: cannot write");
    }
    // Everything that could differ between two checkouts of the same tree is
    // fixed: order, times, owners, modes (X keeps the executable bit, which
    // git tracks); --no-recursion because only files are named.
    std::vector<std::string> tar = {"tar",
                                    "--create",
                                    "--format=gnu",
                                    "--file=" + tmp.path + "/package.tar",
                                    "--sort=name",
                                    "--mtime=@0",
                                    "--owner=0",
                                    "--group=0",
                                    "--numeric-owner",
                                    "--mode=u=rwX,go=rX",
                                    "--no-recursion",
                                    "--dereference",
                                    "-C",
                                    tmp.path,
                                    "MANIFEST",
                                    "-C",
                                    fs::absolute(opt.root).string()};
    tar.insert(tar.end(), files.begin(), files.end());
    must_run(tar, ".");

    // The tarball is small (the limits of --verify): compressed in memory,
    // then written by the one atomic writer.
    write_file_atomic(out_path, must_run({"gzip", "-n", "-9", "-c", tmp.path + "/package.tar"}, ".").out);
    out << "wrote " << out_path << ": " << files.size() << " files, submission sha256 " << tree_hash
        << (forced.empty() ? "" : " (forced: " + forced + ")") << "\n";
    return kExitOk;
  } catch (const InputError& e) {
    err << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    err << "scorer package: " << e.what() << "\n";
    return kExitBadInput;
  }
}

int verify_package(const std::string& tarball, std::ostream& out, std::ostream& err) {
  try {
    std::error_code ec;
    if (!fs::is_regular_file(tarball, ec)) {
      err << "scorer package: " << printable(tarball) << ": no such file, or not a regular file\n";
      return kExitBadInput;
    }
    if (fs::file_size(tarball, ec) > kMaxTarballBytes) {
      err << "scorer package: " << printable(tarball) << ": larger than " << (kMaxTarballBytes >> 20)
          << " MiB, the most a tarball may hold\n";
      return kExitBadInput;
    }
    const StopSignals signals;  // the extraction is removed however --verify ends
    TempDir tmp;
    const std::string file = "--file=" + fs::absolute(tarball).string();
    Proc list =
        run_command({"tar", "--list", "--verbose", "--gzip", "--numeric-owner", "--quoting-style=escape", file}, ".");
    if (signals.stopped()) return kExitInterrupted;
    if (!list.ok) {
      err << "scorer package: " << printable(tarball) << ": not a readable .tar.gz (" << last_line(list.err) << ")\n";
      return kExitBadInput;
    }
    if (const std::string why = check_listing(list.out); !why.empty()) {
      err << printable(tarball) << ": refused: " << why << "\n";
      return kExitIncorrect;
    }
    Proc x = run_command({"tar", "--extract", "--gzip", "--no-same-owner", file, "-C", tmp.path}, ".");
    if (signals.stopped()) return kExitInterrupted;
    if (!x.ok) {
      err << "scorer package: " << printable(tarball) << ": not a readable .tar.gz (" << last_line(x.err) << ")\n";
      return kExitBadInput;
    }
    auto bad = [&](const std::string& why) {
      err << tarball << ": does not match its MANIFEST: " << why << "\n";
      return kExitIncorrect;
    };
    std::set<std::string> present;
    for (const auto& e : fs::recursive_directory_iterator(tmp.path)) {
      if (e.symlink_status().type() == fs::file_type::directory) continue;
      std::string rel = fs::relative(e.path(), tmp.path).generic_string();
      if (e.symlink_status().type() != fs::file_type::regular) return bad(rel + " is not a regular file");
      present.insert(rel);
    }
    if (!present.count("MANIFEST")) return bad("no MANIFEST");
    Manifest m;
    try {
      m = parse_manifest(read_input_file(tmp.path + "/MANIFEST", kMaxShapesFileBytes, "a MANIFEST"));
    } catch (const std::runtime_error& e) {
      return bad(e.what());
    }
    present.erase("MANIFEST");
    for (const auto& [path, sha] : m.files) {
      if (!present.count(path)) return bad(path + " is listed but missing");
      if (sha256_file(tmp.path + "/" + path) != sha) return bad(path + " has another sha256 than listed");
      present.erase(path);
    }
    if (!present.empty()) return bad(*present.begin() + " is in the tarball but not listed");
    if (sha256_string(m.files_text) != m.get("submission_sha256"))
      return bad("submission_sha256 is not the hash of the listed files");
    const std::string expect_forced =
        forced_reason(m.get("selected_run") == "yes", m.get("run_submission_sha256"), m.get("submission_sha256"));
    if (m.get("forced") != expect_forced)
      return bad("its forced: line says '" + printable(m.get("forced")) + "' where what it records says '" +
                 expect_forced + "'");
    if (signals.stopped()) return kExitInterrupted;
    out << tarball << ": OK, " << m.files.size() << " files match the MANIFEST (submission sha256 "
        << m.get("submission_sha256") << (m.get("forced").empty() ? "" : "; packaged with --force: " + m.get("forced"))
        << ")\n";
    return kExitOk;
  } catch (const std::exception& e) {
    err << "scorer package: " << e.what() << "\n";
    return kExitBadInput;
  }
}

int package_main(const std::vector<std::string>& args) {
  PackageArgs a;
  if (const int rc = parse_package_args(args, &a); rc != kGoOn) return rc;
  const PackageOptions& opt = a.package;
  const std::string& verify = a.verify;
  if (!verify.empty()) return verify_package(verify, std::cout, std::cerr);
  return build_package(opt, std::cout, std::cerr);
}

}  // namespace scorer
