// The one way the scorer starts a process. Runs a piece of GPU work in a forked child process, so that a kernel that
// crashes, hangs or corrupts its context takes down only that child. The
// parent never initialises CUDA, which is what makes fork() safe here.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace scorer {

struct ChildOutcome {
  enum Kind { ok, crashed, timed_out, interrupted } kind = ok;
  std::string output;  // what the child wrote on its pipe (a JSON document when ok)
  std::string detail;  // how it ended when not ok: "killed by signal 11 (Segmentation fault)", ...
};

// Forks; the child runs `work` and writes its return value to the pipe, then
// exits. The parent waits at most `timeout_s` seconds for the child to end,
// then kills it; either way it kills whatever the child left running (the
// child has a process group of its own).
ChildOutcome run_in_child(const std::function<std::string()>& work, double timeout_s);

// The same for another program: argv[0] is executed (no shell) and its
// standard output is the outcome's output.
ChildOutcome run_program(const std::vector<std::string>& argv, double timeout_s);

// A program run to its end by run_command.
struct CommandResult {
  bool ok = false;  // exited with status 0
  std::string out;  // stdout, unless it went to a descriptor
  std::string err;  // stderr
};

// Runs argv[0] (searched on PATH when it has no '/') in directory `cwd` (empty: this process's),
// no shell, stdin from /dev/null, and waits for it to end. stdout goes to `stdout_fd`, or is
// captured when that is -1; stderr is captured through a temporary file so that neither pipe
// can fill while the other is read. Throws std::runtime_error when it cannot be started.
CommandResult run_command(const std::vector<std::string>& argv, const std::string& cwd = "", int stdout_fd = -1);

// After this, SIGINT and SIGTERM no longer end the process: the child in
// progress is killed and comes back `interrupted`, and stop_requested() stays
// true, so the caller can stop and keep what it has. Children get the default
// handlers back.
void catch_stop_signals();
bool stop_requested();

}  // namespace scorer
