// SHA-256 digests as 64 lowercase hex characters. They are computed by the
// coreutils `sha256sum` program run as a child process (no shell), so that the
// scorer carries no cryptographic code of its own and links no extra library.
// Both throw std::runtime_error when the file cannot be read or the program
// cannot be run or fails.
#pragma once

#include <string>

namespace scorer {

std::string sha256_file(const std::string& path);
std::string sha256_string(const std::string& bytes);

}  // namespace scorer
