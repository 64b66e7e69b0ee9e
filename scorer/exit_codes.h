// Exit codes of every scorer command, for scripts.
#pragma once

namespace scorer {
constexpr int kExitOk = 0;             // all correct (run/check), or the command did what it said
constexpr int kExitIncorrect = 1;      // a correctness failure (run/check); a `--fail-on` verdict (diff); a run
                                       // that did not pass (select); a refusal or a MANIFEST mismatch (package)
constexpr int kExitBadInput = 2;       // bad command line, shapes file, results file or tarball; an error no check
                                       // foresaw (out of host memory included), caught in main
constexpr int kExitNoGpu = 3;          // no usable GPU, or a CUDA error outside any one shape
constexpr int kExitInterrupted = 130;  // run/check stopped by SIGINT or SIGTERM (shell convention)
}  // namespace scorer
