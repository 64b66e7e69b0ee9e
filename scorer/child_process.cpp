#include "scorer/child_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace scorer {
namespace {

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

}  // namespace

ChildOutcome run_in_child(const std::function<std::string()>& work, double timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    child_setup();
    close(fds[0]);
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
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    child_setup();
    close(fds[0]);
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

}  // namespace scorer

