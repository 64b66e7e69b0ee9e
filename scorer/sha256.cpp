#include "scorer/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace scorer {
namespace {

// One digest fed in pieces, through OpenSSL's EVP interface.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
      throw std::runtime_error("sha256: cannot start a digest");
  }
  void add(const char* data, size_t n) {
    if (n && EVP_DigestUpdate(ctx_.get(), data, n) != 1) throw std::runtime_error("sha256: digest update failed");
  }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), md, &len) != 1) throw std::runtime_error("sha256: digest final failed");
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (unsigned int i = 0; i < len; ++i) s += digits[md[i] >> 4], s += digits[md[i] & 15];
    return s;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

}  // namespace

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": " + std::strerror(errno));
  Sha256 d;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) d.add(buf, size_t(in.gcount()));
  if (in.bad()) throw std::runtime_error(path + ": read error");
  return d.hex();
}

std::string sha256_string(const std::string& bytes) {
  Sha256 d;
  d.add(bytes.data(), bytes.size());
  return d.hex();
}

}  // namespace scorer
