#include "sha256.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace scorer {
namespace {

[[noreturn]] void fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + std::strerror(err));
}

// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  void reset() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

struct FileActions {
  posix_spawn_file_actions_t fa;
  FileActions() {
    if (int rc = posix_spawn_file_actions_init(&fa))
      fail("sha256sum: posix_spawn_file_actions_init", rc);
  }
  ~FileActions() { posix_spawn_file_actions_destroy(&fa); }
  void dup2(int from, int to) {
    if (int rc = posix_spawn_file_actions_adddup2(&fa, from, to))
      fail("sha256sum: posix_spawn_file_actions_adddup2", rc);
  }
};

bool is_hex_digest(const std::string& s) {
  if (s.size() < 65 || s[64] != ' ') return false;
  for (int i = 0; i < 64; ++i)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

// Runs `sha256sum` reading the descriptor `input` as its standard input (so
// that no file name, with its quoting rules, appears in its output) and
// returns the digest. `what` names the input in errors.
std::string digest_of(int input, const std::string& what) {
  int out[2];
  // O_CLOEXEC keeps these descriptors out of children other threads may spawn;
  // dup2 in the child clears it on the copies that sha256sum uses.
  if (pipe2(out, O_CLOEXEC) != 0) fail(what + ": pipe", errno);
  Fd rd(out[0]), wr(out[1]);
  pid_t pid;
  {
    FileActions fa;
    fa.dup2(input, 0);
    fa.dup2(wr.fd, 1);
    fa.dup2(wr.fd, 2);  // so that its error message can be reported
    char arg0[] = "sha256sum", arg1[] = "-b";
    char* argv[] = {arg0, arg1, nullptr};
    if (int rc = posix_spawnp(&pid, "sha256sum", &fa.fa, nullptr, argv, environ))
      fail(what + ": cannot run sha256sum", rc);
  }
  wr.reset();  // else the read below never sees end of file

  std::string text;
  int read_errno = 0;
  char buf[512];
  for (;;) {
    const ssize_t n = read(rd.fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, size_t(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      read_errno = errno;
      break;
    }
  }
  rd.reset();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) fail(what + ": waitpid", errno);
  if (read_errno) fail(what + ": reading the output of sha256sum", read_errno);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !is_hex_digest(text)) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    const std::string how = WIFEXITED(status)
                                ? "exit " + std::to_string(WEXITSTATUS(status))
                                : "killed by signal " + std::to_string(WTERMSIG(status));
    throw std::runtime_error(what + ": sha256sum failed (" + how + ")" +
                             (text.empty() ? "" : ": " + text.substr(0, text.find('\n'))));
  }
  return text.substr(0, 64);
}

}  // namespace

std::string sha256_file(const std::string& path) {
  Fd f(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) fail(path + ": cannot read", errno);
  return digest_of(f.fd, path);
}

std::string sha256_string(const std::string& bytes) {
  // The bytes go through an anonymous in-memory file rather than a pipe: the
  // child reads it at its own pace, so writing can neither block on a full pipe
  // nor raise SIGPIPE if the child dies early.
  Fd f(memfd_create("sha256-input", MFD_CLOEXEC));
  if (f.fd < 0) fail("sha256 of a string: memfd_create", errno);
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = write(f.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("sha256 of a string: write", errno);
    }
    done += size_t(n);
  }
  if (lseek(f.fd, 0, SEEK_SET) != 0) fail("sha256 of a string: lseek", errno);
  return digest_of(f.fd, "sha256 of a string");
}

}  // namespace scorer
