// scorer package: reproducible tarballs of exactly the submission's files, the
// refusals, and --verify. Each case builds a throwaway git checkout with a
// fake submission/ (tracked, untracked, ignored and built files).
#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>

#include "scorer/commands.h"
#include "scorer/exit_codes.h"
#include "scorer/package.h"
#include "scorer/results_json.h"
#include "scorer/sha256.h"
#include "tests/sample_run.h"

namespace {

using namespace scorer;
namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

// Output of a shell command; the paths in it are temporary directories of
// letters, digits and dashes, quoted.
std::string shell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  REQUIRE_MESSAGE(pclose(p) == 0, cmd);
  return out;
}

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

std::string random_text(size_t n) {
  static std::mt19937_64 rng(std::random_device{}());
  std::string s;
  for (size_t i = 0; i < n; ++i) s += static_cast<char>('a' + rng() % 26);
  return s + "\n";
}

// A git checkout with scripts/tree-hash and a submission/ holding tracked,
// untracked, ignored and built files.
struct Repo {
  fs::path root;
  Repo() {
    REQUIRE_MESSAGE(fs::exists("scripts/tree-hash"), "run the tests from the project's root");
    std::string t = (fs::temp_directory_path() / "cpu_package-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    root = t;
    fs::create_directories(root / "scripts");
    fs::copy_file("scripts/tree-hash", root / "scripts/tree-hash");
    write(root / ".gitignore", "*.o\nbuild/\nresults/\n");
    write(root / "submission/submission.h", "// contract\n" + random_text(40));
    write(root / "submission/kernel.cu", "// kernel\n" + random_text(300));
    write(root / "submission/run.sh", "#!/bin/sh\necho run\n");
    fs::permissions(root / "submission/run.sh", fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
    shell("cd " + q(root) +
          " && git init -q && git add .gitignore scripts submission && "
          "git -c user.name=t -c user.email=t@example.com -c commit.gpgsign=false commit -qm init");
    write(root / "submission/untracked.cu", "// not yet added\n" + random_text(50));
    write(root / "submission/kernel.o", random_text(64));
    write(root / "submission/build/kernel.bin", random_text(64));
  }
  ~Repo() { fs::remove_all(root); }

  std::vector<std::string> expected_files() const {
    return {"submission/kernel.cu", "submission/run.sh", "submission/submission.h", "submission/untracked.cu"};
  }
  std::string tree_hash() const {
    std::string h = shell("cd " + q(root) + " && scripts/tree-hash submission");
    return h.substr(0, 64);
  }
  void write_best(const std::string& submission_sha256) const {
    RunResult run = test_util::sample_run(1.25, "2025-06-01T10:00:00Z", "0123456789");
    run.meta.submission_sha256 = submission_sha256;
    save_results(run, (root / "results/best.json").string());
  }
  struct Built {
    int rc;
    std::string out, err;
  };
  Built build(const fs::path& out, bool force = false) const {
    PackageOptions opt;
    opt.root = root.string();
    opt.results_dir = (root / "results").string();
    opt.out = out.string();
    opt.force = force;
    std::ostringstream o, e;
    int rc = build_package(opt, o, e);
    return {rc, o.str(), e.str()};
  }
  Built verify(const fs::path& tarball) const {
    std::ostringstream o, e;
    int rc = verify_package(tarball.string(), o, e);
    return {rc, o.str(), e.str()};
  }
};

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

}  // namespace

TEST_CASE("package: byte-for-byte reproducible, and only the submission's files") {
  Repo repo;
  repo.write_best(repo.tree_hash());
  CHECK(submission_files(repo.root.string()) == repo.expected_files());

  auto first = repo.build(repo.root / "out/first.tar.gz");
  REQUIRE_MESSAGE(first.rc == kExitOk, first.err);
  // What must not matter: file times, group/other permission bits, a rebuild.
  for (const std::string& f : repo.expected_files())
    fs::last_write_time(repo.root / f, fs::file_time_type::clock::now() + std::chrono::hours(3));
  fs::permissions(repo.root / "submission/kernel.cu", fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::add);
  auto second = repo.build(repo.root / "results/second.tar.gz");
  REQUIRE_MESSAGE(second.rc == kExitOk, second.err);
  const std::string a = read(repo.root / "out/first.tar.gz"), b = read(repo.root / "results/second.tar.gz");
  REQUIRE(a.size() > 20);
  CHECK(a == b);
  // gzip -n: no name, no time.
  CHECK((static_cast<unsigned char>(a[3]) & 0x08) == 0);
  CHECK(a.substr(4, 4) == std::string(4, '\0'));

  std::vector<std::string> entries = lines(shell("tar -tzf " + q(repo.root / "out/first.tar.gz")));
  std::vector<std::string> expected = {"MANIFEST"};
  for (const std::string& f : repo.expected_files()) expected.push_back(f);
  CHECK(entries == expected);
  for (const std::string& l : lines(shell("tar --numeric-owner -tvzf " + q(repo.root / "out/first.tar.gz")))) {
    CAPTURE(l);
    CHECK(l.find(" 0/0 ") != std::string::npos);
    CHECK(l.find("1970-01-01") != std::string::npos);
    const bool exec = l.find("run.sh") != std::string::npos;
    CHECK(l.rfind(exec ? "-rwxr-xr-x " : "-rw-r--r-- ", 0) == 0);
  }

  const std::string manifest = shell("tar -xzOf " + q(repo.root / "out/first.tar.gz") + " MANIFEST");
  CHECK(manifest.find("submission_sha256: " + repo.tree_hash() + "\n") != std::string::npos);
  CHECK(manifest.find("git_dirty: yes\n") != std::string::npos);  // the untracked file
  const std::string head = shell("cd " + q(repo.root) + " && git rev-parse HEAD");
  CHECK(manifest.find("git_commit: " + head) != std::string::npos);
  // The selected run's figures as its trials give them.
  const RunResult best = load_results((repo.root / "results/best.json").string());
  char agg[96];
  std::snprintf(agg, sizeof agg, "run_aggregate: %.4fx [%.4f, %.4f]\n", best.aggregate.point, best.aggregate.lo,
                best.aggregate.hi);
  CHECK(manifest.find(agg) != std::string::npos);
  CHECK(manifest.find("run_regime: dense ") != std::string::npos);
  CHECK(manifest.find("run_gpu: NVIDIA H200\n") != std::string::npos);
  CHECK(manifest.find("forced:") == std::string::npos);
  for (const std::string& f : repo.expected_files())
    CHECK(manifest.find(sha256_file((repo.root / f).string()) + "  " + f + "\n") != std::string::npos);

  auto v = repo.verify(repo.root / "out/first.tar.gz");
  CHECK_MESSAGE(v.rc == kExitOk, v.err);
  CHECK(v.out.find("4 files match") != std::string::npos);
}

TEST_CASE("package: refuses without a selected best or with one scored with another submission, unless --force") {
  Repo repo;
  const fs::path out = repo.root / "results/submission.tar.gz";

  auto none = repo.build(out);
  CHECK(none.rc == kExitIncorrect);
  CHECK(none.err.find("no selected best") != std::string::npos);
  CHECK_FALSE(fs::exists(out));

  repo.write_best(std::string(64, 'f'));
  auto other = repo.build(out);
  CHECK(other.rc == kExitIncorrect);
  CHECK(other.err.find("scored with submission " + std::string(64, 'f')) != std::string::npos);
  CHECK_FALSE(fs::exists(out));

  auto forced = repo.build(out, true);
  REQUIRE_MESSAGE(forced.rc == kExitOk, forced.err);
  const std::string manifest = shell("tar -xzOf " + q(out) + " MANIFEST");
  CHECK(manifest.find("forced: the selected best was scored with submission ffff") != std::string::npos);
  auto v = repo.verify(out);
  CHECK(v.rc == kExitOk);
  CHECK(v.out.find("packaged with --force") != std::string::npos);

  // A truncated best.json is bad input, not a reason to package.
  fs::remove(out);
  const std::string best = read(repo.root / "results/best.json");
  write(repo.root / "results/best.json", best.substr(0, best.size() / 2));
  auto broken = repo.build(out, true);
  CHECK(broken.rc == kExitBadInput);
  CHECK(broken.err.rfind((repo.root / "results/best.json").string() + ":", 0) == 0);
  CHECK(broken.err.find('\n') == broken.err.size() - 1);
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("package --verify detects a modified, missing or extra file and a broken tarball") {
  Repo repo;
  repo.write_best(repo.tree_hash());
  const fs::path good = repo.root / "results/good.tar.gz";
  REQUIRE(repo.build(good).rc == kExitOk);
  const fs::path x = repo.root / "results/x";
  const fs::path bad = repo.root / "results/bad.tar.gz";
  auto repack = [&](const std::function<void()>& change) {
    fs::remove_all(x);
    fs::create_directories(x);
    shell("tar -xzf " + q(good) + " -C " + q(x));
    change();
    shell("tar -czf " + q(bad) + " -C " + q(x) + " .");
  };

  repack([] {});
  CHECK(repo.verify(bad).rc == kExitOk);

  repack([&] { std::ofstream(x / "submission/kernel.cu", std::ios::app) << "// one more line\n"; });
  auto modified = repo.verify(bad);
  CHECK(modified.rc == kExitIncorrect);
  CHECK(modified.err.find("submission/kernel.cu has another sha256") != std::string::npos);

  repack([&] { write(x / "submission/extra.cu", "extra\n"); });
  auto extra = repo.verify(bad);
  CHECK(extra.rc == kExitIncorrect);
  CHECK(extra.err.find("submission/extra.cu is in the tarball but not listed") != std::string::npos);

  repack([&] { fs::remove(x / "submission/run.sh"); });
  auto missing = repo.verify(bad);
  CHECK(missing.rc == kExitIncorrect);
  CHECK(missing.err.find("submission/run.sh is listed but missing") != std::string::npos);

  repack([&] {
    std::string m = read(x / "MANIFEST");
    size_t at = m.find("submission_sha256: ") + 19;
    m[at] = m[at] == '0' ? '1' : '0';
    write(x / "MANIFEST", m);
  });
  CHECK(repo.verify(bad).rc == kExitIncorrect);

  write(bad, "not a tarball\n");
  std::string err;
  int rc;
  {
    std::ostringstream captured;
    std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
    rc = package_main({"--verify", bad.string()});
    std::cerr.rdbuf(old);
    err = captured.str();
  }
  CHECK(rc == kExitBadInput);
  CHECK(err.find("not a readable .tar.gz") != std::string::npos);
}

TEST_CASE("package: a file name the MANIFEST cannot list is refused by name, even with --force") {
  Repo repo;
  repo.write_best(repo.tree_hash());
  write(repo.root / "submission/back\\slash.cu", "// a kernel\n");
  const auto b = repo.build(repo.root / "results/submission.tar.gz", true);
  CHECK(b.rc == kExitBadInput);
  CHECK(b.err == repo.root.string() +
                     "/submission/back\\slash.cu: a file name with a backslash or a newline cannot be packaged; "
                     "rename it\n");
  CHECK(!fs::exists(repo.root / "results/submission.tar.gz"));
}

TEST_CASE("package: a symbolic link under submission/ that leaves it is refused, by name") {
  Repo repo;
  repo.write_best(repo.tree_hash());
  const fs::path secret = repo.root.parent_path() / (repo.root.filename().string() + "-secret");
  write(secret, "a private key\n");
  fs::create_symlink(secret, repo.root / "submission/leak.cu");
  const auto b = repo.build(repo.root / "results/submission.tar.gz", true);
  fs::remove(secret);
  CHECK(b.rc == kExitBadInput);
  CHECK(b.err.rfind(repo.root.string() + "/submission/leak.cu: a symbolic link to " + secret.string() +
                        ", which leaves submission/",
                    0) == 0);
  CHECK(!fs::exists(repo.root / "results/submission.tar.gz"));
}

TEST_CASE("package --verify refuses duplicate members, links, and a forced: line that does not match") {
  Repo repo;
  repo.write_best(repo.tree_hash());
  const fs::path good = repo.root / "results/good.tar.gz";
  REQUIRE(repo.build(good).rc == kExitOk);
  const fs::path x = repo.root / "results/x";
  const fs::path bad = repo.root / "results/bad.tar.gz";
  fs::create_directories(x);
  shell("tar -xzf " + q(good) + " -C " + q(x));
  const std::string files =
      "MANIFEST submission/kernel.cu submission/run.sh submission/submission.h "
      "submission/untracked.cu";

  shell("tar --hard-dereference -czf " + q(bad) + " -C " + q(x) + " " + files + " submission/kernel.cu");
  auto v = repo.verify(bad);
  CHECK(v.rc == kExitIncorrect);
  CHECK(v.err == bad.string() + ": refused: submission/kernel.cu is in the tarball twice\n");

  fs::create_symlink("kernel.cu", x / "submission/alias.cu");
  shell("tar -czf " + q(bad) + " -C " + q(x) + " " + files + " submission/alias.cu");
  v = repo.verify(bad);
  CHECK(v.err == bad.string() + ": refused: submission/alias.cu is a symbolic link, which a package never holds\n");
  fs::remove(x / "submission/alias.cu");

  fs::create_hard_link(x / "submission/kernel.cu", x / "submission/twin.cu");
  shell("tar -czf " + q(bad) + " -C " + q(x) + " " + files + " submission/twin.cu");
  v = repo.verify(bad);
  CHECK(v.rc == kExitIncorrect);
  CHECK(v.err.find("is a hard link, which a package never holds") != std::string::npos);
  fs::remove(x / "submission/twin.cu");

  // A package of the selected submission claims it was forced; one built with --force drops the line.
  const std::string manifest = read(x / "MANIFEST");
  write(x / "MANIFEST", manifest.substr(0, manifest.find("\n\n")) + "\nforced: no selected best" +
                            manifest.substr(manifest.find("\n\n")));
  shell("tar -czf " + q(bad) + " -C " + q(x) + " " + files);
  v = repo.verify(bad);
  CHECK(v.rc == kExitIncorrect);
  CHECK(v.err.find("its forced: line says 'no selected best' where what it records says ''") != std::string::npos);

  fs::remove(repo.root / "results/best.json");
  REQUIRE(repo.build(good, true).rc == kExitOk);
  shell("tar -xzf " + q(good) + " -C " + q(x));
  const std::string forced = read(x / "MANIFEST");
  const size_t at = forced.find("forced: ");
  REQUIRE(at != std::string::npos);
  write(x / "MANIFEST", forced.substr(0, at) + forced.substr(forced.find('\n', at) + 1));
  shell("tar -czf " + q(bad) + " -C " + q(x) + " " + files);
  v = repo.verify(bad);
  CHECK(v.err.find("its forced: line says '' where what it records says 'no selected best'") != std::string::npos);
}

TEST_CASE("package --verify removes its extraction when interrupted, and bounds what it extracts") {
  Repo repo;
  const fs::path tmp = repo.root / "tmp";
  fs::create_directories(tmp);
  fs::create_directories(repo.root / "results");
  const fs::path big = repo.root / "results/big.tar.gz";
  write(repo.root / "x/MANIFEST", "");
  {
    std::ofstream f(repo.root / "x/zeros", std::ios::binary);
    f << std::string(size_t(60) << 20, '\0');  // compresses to little; extracts slowly enough
  }
  shell("tar -czf " + q(big) + " -C " + q(repo.root / "x") + " MANIFEST zeros");
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setenv("TMPDIR", tmp.c_str(), 1);
    std::ostringstream o, e;
    _exit(verify_package(big.string(), o, e));
  }
  // Once its extraction exists, stop it.
  bool seen = false;
  for (int i = 0; i < 20000 && !seen; ++i) {
    seen = fs::directory_iterator(tmp) != fs::directory_iterator();
    if (!seen) usleep(100);
  }
  CHECK(seen);
  kill(pid, SIGTERM);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == kExitInterrupted);
  CHECK(fs::directory_iterator(tmp) == fs::directory_iterator());  // nothing left behind

  // Past the limits: refused from the listing, before anything is extracted.
  {
    std::ofstream f(repo.root / "x/zeros", std::ios::binary);
    f << std::string(size_t(65) << 20, '\0');
  }
  shell("tar -czf " + q(big) + " -C " + q(repo.root / "x") + " MANIFEST zeros");
  const auto v = repo.verify(big);
  CHECK(v.rc == kExitIncorrect);
  CHECK(v.err == big.string() + ": refused: more than 64 MiB in all\n");
}
