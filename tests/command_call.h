// Runs a subcommand's entry point (scorer/commands.h) as the binary would,
// with its stdout and stderr captured.
#pragma once

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace test_util {

struct Outcome {
  int rc;
  std::string err;
  std::string out;
};

inline Outcome call(int (*command)(const std::vector<std::string>&), const std::vector<std::string>& args) {
  std::ostringstream out, err;
  std::streambuf* old_out = std::cout.rdbuf(out.rdbuf());
  std::streambuf* old_err = std::cerr.rdbuf(err.rdbuf());
  const int rc = command(args);
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  return {rc, err.str(), out.str()};
}

}  // namespace test_util
