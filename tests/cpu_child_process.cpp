// run_in_child: how a child's end becomes an outcome (a result, a crash, a hang
// killed at the timeout, an interrupt). No GPU: the children do plain work.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "scorer/child_process.h"

using scorer::ChildOutcome;
using scorer::run_in_child;

TEST_CASE("child: a result comes back whole") {
  const std::string big(200000, 'x');  // larger than a pipe's buffer
  const ChildOutcome c = run_in_child([&] { return big; }, 10);
  CHECK(c.kind == ChildOutcome::ok);
  CHECK(c.output == big);
}

TEST_CASE("child: a crash is reported with its signal") {
  const ChildOutcome c = run_in_child(
      []() -> std::string {
        // As in the scorer, where no handler catches it: the child inherits
        // doctest's, which would print a crash report of its own first.
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
        return "unreachable";
      },
      10);
  CHECK(c.kind == ChildOutcome::crashed);
  CHECK(c.detail.find("signal 11") != std::string::npos);
}

TEST_CASE("child: an exception in the child is a crash, not a result") {
  const ChildOutcome c = run_in_child([]() -> std::string { throw std::runtime_error("boom"); }, 10);
  CHECK(c.kind == ChildOutcome::crashed);
  CHECK(c.output.empty());
}

TEST_CASE("child: a hang is killed at the timeout") {
  const auto t0 = std::chrono::steady_clock::now();
  const ChildOutcome c = run_in_child(
      []() -> std::string {
        for (;;) pause();
      },
      0.5);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(c.kind == ChildOutcome::timed_out);
  CHECK(secs < 5);
}

TEST_CASE("child: SIGINT to the parent kills the child in progress and is remembered") {
  // In a process of its own, since catching the stop signals is for good.
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    scorer::catch_stop_signals();
    std::thread later([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      kill(getpid(), SIGINT);
    });
    const ChildOutcome c = run_in_child(
        []() -> std::string {
          for (;;) pause();
        },
        30);
    later.join();
    const bool ok = c.kind == ChildOutcome::interrupted && scorer::stop_requested();
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Running, not a zombie left for init to reap.
bool running(pid_t p) {
  std::ifstream f("/proc/" + std::to_string(p) + "/stat");
  std::string pid, comm, state;
  return p > 0 && (f >> pid >> comm >> state) && state != "Z";
}

// Forks a grandchild that sleeps, holding (or not) the child's pipe; its
// pid goes to the test through `pid_file`.
void leave_grandchild(const std::string& pid_file, bool close_pipe) {
  const pid_t g = fork();
  if (g == 0) {
    if (close_pipe)
      for (int fd = 3; fd < 1024; ++fd) close(fd);
    sleep(30);
    _exit(0);
  }
  std::ofstream(pid_file) << g << "\n";
}

std::string pid_file_path() {
  return (std::filesystem::temp_directory_path() / ("cpu_child_process." + std::to_string(getpid()) + ".pid")).string();
}

pid_t read_pid(const std::string& pid_file) {
  std::ifstream f(pid_file);
  pid_t p = 0;
  f >> p;
  return p;
}

}  // namespace

TEST_CASE("child: a finished child's result comes back at once, though a grandchild holds its pipe") {
  const std::string pid_file = pid_file_path();
  const auto t0 = std::chrono::steady_clock::now();
  const ChildOutcome c = run_in_child(
      [&] {
        leave_grandchild(pid_file, false);
        return std::string("{\"result\": 1}");
      },
      5);
  CHECK(c.kind == ChildOutcome::ok);
  CHECK(c.output == "{\"result\": 1}");
  CHECK(seconds_since(t0) < 2);
  const pid_t g = read_pid(pid_file);
  usleep(100000);
  CHECK_FALSE(running(g));  // killed with the child's process group
  std::remove(pid_file.c_str());
}

TEST_CASE("child: a hang after closing the pipe is still killed at the timeout, with what it left running") {
  const std::string pid_file = pid_file_path();
  const auto t0 = std::chrono::steady_clock::now();
  const ChildOutcome c = run_in_child(
      [&]() -> std::string {
        leave_grandchild(pid_file, true);
        for (int fd = 3; fd < 1024; ++fd) close(fd);
        for (;;) pause();
      },
      1);
  CHECK(c.kind == ChildOutcome::timed_out);
  CHECK(seconds_since(t0) < 3);
  const pid_t g = read_pid(pid_file);
  usleep(100000);
  CHECK_FALSE(running(g));
  std::remove(pid_file.c_str());
}

TEST_CASE("child: a program that closes its output and hangs is killed at the timeout") {
  const auto t0 = std::chrono::steady_clock::now();
  const ChildOutcome c = scorer::run_program({"/bin/sh", "-c", "exec >&-; sleep 5"}, 1);
  CHECK(c.kind == ChildOutcome::timed_out);
  CHECK(seconds_since(t0) < 3);
}
