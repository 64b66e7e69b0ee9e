#include "scorer/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace scorer {
namespace {

[[noreturn]] void sys_fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + std::strerror(err));
}

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

// The child's set-up: default stop signals, and a process group of its own,
// so that the parent can kill whatever the child leaves running (a
// grandchild) along with it. Out of the terminal's foreground group, a
// write to the terminal would stop the child under `stty tostop`, unless
// SIGTTOU is ignored.
void child_setup() {
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGTTOU, SIG_IGN);
  setpgid(0, 0);
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(4);
    off += size_t(n);
  }
}

std::string describe(int status) {
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status)) + " without a result";
  return "ended abnormally";
}

// Reads the child's pipe until the child has ended and the pipe is drained,
// or until the deadline; then kills the child's process group and reaps the
// child. The pipe's end of file alone does not say the child has ended: a
// grandchild holding the pipe open would make a finished child look hung,
// and a child that closed its end and then hung would be waited for without
// a deadline. So the child is also reaped as it ends; once it has, the pipe
// holds all it wrote, and a pipe idle after that is a grandchild's.
ChildOutcome collect(pid_t pid, int fds[2], double timeout_s) {
  close(fds[1]);
  setpgid(pid, pid);  // in the parent too: whichever runs first
  ChildOutcome res;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[65536];
  bool timed_out = false, interrupted = false, reaped = false, eof = false;
  int status = 0;
  for (;;) {
    if (!reaped && waitpid(pid, &status, WNOHANG) == pid) reaped = true;
    if (reaped && eof) break;
    if (g_stop) {
      interrupted = true;
      break;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = !reaped;
      break;
    }
    if (eof) {  // the child closed its end but runs on
      usleep(10000);
      continue;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = poll(&p, 1, int(std::min<long long>(left, reaped ? 10 : 100)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      if (reaped) break;
      continue;
    }
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = true;
      continue;
    }
    res.output.append(buf, size_t(n));
  }
  close(fds[0]);
  kill(-pid, SIGKILL);  // the child's process group: the child if it runs on, and what it left behind
  if (!reaped)
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  if (interrupted) {
    res.kind = ChildOutcome::interrupted;
    res.detail = "interrupted";
  } else if (timed_out) {
    res.kind = ChildOutcome::timed_out;
    res.detail = "no result after " + std::to_string(int(timeout_s)) + " s: killed";
  } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    res.kind = ChildOutcome::crashed;
    res.detail = describe(status);
  }
  return res;
}

// A pipe and a child: in the child (0 returned), set up and holding only the pipe's write end.
pid_t fork_with_pipe(int (&fds)[2]) {
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    child_setup();
    close(fds[0]);
  }
  return pid;
}

}  // namespace

ChildOutcome run_in_child(const std::function<std::string()>& work, double timeout_s) {
  int fds[2];
  const pid_t pid = fork_with_pipe(fds);
  if (pid == 0) {
    std::string out;
    try {
      out = work();
    } catch (const std::exception& e) {
      write_all(2, std::string("child: ") + e.what() + "\n");
      _exit(5);
    }
    write_all(fds[1], out);
    close(fds[1]);
    _exit(0);  // skip static destructors: the CUDA context goes with the process
  }
  return collect(pid, fds, timeout_s);
}

ChildOutcome run_program(const std::vector<std::string>& argv, double timeout_s) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int fds[2];
  const pid_t pid = fork_with_pipe(fds);
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[1]);
    execv(args[0], args.data());
    _exit(127);
  }
  return collect(pid, fds, timeout_s);
}

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_stop != 0; }

CommandResult run_command(const std::vector<std::string>& argv, const std::string& cwd, int stdout_fd) {
  const std::string what = argv[0];
  FILE* errf = std::tmpfile();
  if (!errf) sys_fail(what + ": tmpfile", errno);
  struct CloseFile {
    FILE* f;
    ~CloseFile() { std::fclose(f); }
  } close_errf{errf};
  int pipefd[2] = {-1, -1};
  pid_t pid = -1;
  if (stdout_fd < 0 && pipe2(pipefd, O_CLOEXEC) != 0) sys_fail(what + ": pipe", errno);

  posix_spawn_file_actions_t fa;
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc == 0) {
    rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa, stdout_fd >= 0 ? stdout_fd : pipefd[1], 1);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa, fileno(errf), 2);
    if (rc == 0 && !cwd.empty()) rc = posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (rc == 0) rc = posix_spawnp(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
  }
  if (pipefd[1] >= 0) close(pipefd[1]);  // else the read below never sees end of file
  if (rc != 0) {
    if (pipefd[0] >= 0) close(pipefd[0]);
    sys_fail("cannot run " + what, rc);
  }
  CommandResult p;
  if (pipefd[0] >= 0) {
    char buf[65536];
    for (;;) {
      ssize_t n = read(pipefd[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      p.out.append(buf, static_cast<size_t>(n));
    }
    close(pipefd[0]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) sys_fail(what + ": waitpid", errno);
  p.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::rewind(errf);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, errf)) > 0;) p.err.append(buf, n);
  return p;
}

}  // namespace scorer
