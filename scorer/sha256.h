// SHA-256 digests as 64 lowercase hex characters, through OpenSSL's EVP
// interface (libcrypto), so that the scorer carries no cryptographic code of
// its own. Both throw std::runtime_error when the file cannot be read.
#pragma once

#include <string>

namespace scorer {

std::string sha256_file(const std::string& path);
std::string sha256_string(const std::string& bytes);

}  // namespace scorer
