// Calls a scorer command in this process with its stdout and stderr
// captured, for tests of what a command prints and returns.
#pragma once

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace test_util {

struct CommandOutcome {
  int rc = 0;
  std::string out, err;
};

inline CommandOutcome call_command(int (*command)(const std::vector<std::string>&),
                                   const std::vector<std::string>& args) {
  std::ostringstream out, err;
  std::streambuf* old_out = std::cout.rdbuf(out.rdbuf());
  std::streambuf* old_err = std::cerr.rdbuf(err.rdbuf());
  const int rc = command(args);
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  return {rc, out.str(), err.str()};
}

}  // namespace test_util
