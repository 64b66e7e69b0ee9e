// run_in_child: how a child's end becomes an outcome (a result, a crash, a hang
// killed at the timeout, an interrupt). No GPU: the children do plain work.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
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
  const ChildOutcome c = run_in_child([]() -> std::string {
    // As in the scorer, where no handler catches it: the child inherits
    // doctest's, which would print a crash report of its own first.
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
    return "unreachable";
  }, 10);
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
  const ChildOutcome c = run_in_child([]() -> std::string {
    for (;;) pause();
  }, 0.5);
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
    const ChildOutcome c = run_in_child([]() -> std::string {
      for (;;) pause();
    }, 30);
    later.join();
    const bool ok = c.kind == ChildOutcome::interrupted && scorer::stop_requested();
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
