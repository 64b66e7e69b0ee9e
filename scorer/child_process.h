// Runs a piece of GPU work in a forked child process, so that a kernel that
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

// After this, SIGINT and SIGTERM no longer end the process: the child in
// progress is killed and comes back `interrupted`, and stop_requested() stays
// true, so the caller can stop and keep what it has. Children get the default
// handlers back.
void catch_stop_signals();
bool stop_requested();

}  // namespace scorer
