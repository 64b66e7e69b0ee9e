#include "scorer/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "scorer/shapes.h"

namespace scorer {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& what, int err) { throw std::runtime_error(what + ": " + std::strerror(err)); }

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "a special file";
}

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

void write_all(int fd, const std::string& data, const std::string& path) {
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path + ": cannot write", errno);
    done += size_t(n);
  }
  // Synced before the rename: else a crash soon after could leave the target
  // renamed but empty on some filesystems.
  if (fsync(fd) != 0) fail(path + ": cannot write", errno);
}

}  // namespace

std::string read_input_file(const std::string& path, size_t max_bytes, const std::string& what) {
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw InputError(printable(path) + ": cannot read: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) != 0) throw InputError(printable(path) + ": cannot read: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw InputError(printable(path) + ": cannot read: " + std::strerror(EISDIR));
  if (!S_ISREG(st.st_mode))
    throw InputError(printable(path) + ": cannot read: " + kind_of(st.st_mode) + ", not a regular file");
  if (size_t(st.st_size) > max_bytes)
    throw InputError(printable(path) + ": larger than " + mib(max_bytes) + ", the most " + what + " may hold");
  // Read to the end with the limit still applied: a file that grows while
  // it is read stops at the limit all the same.
  std::string text;
  text.resize(size_t(st.st_size));
  size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      if (text.size() > max_bytes)
        throw InputError(printable(path) + ": larger than " + mib(max_bytes) + ", the most " + what + " may hold");
      text.resize(std::min(max_bytes + 1, text.size() + 65536));
    }
    const ssize_t n = read(fd, &text[got], text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(printable(path) + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;
    got += size_t(n);
  }
  text.resize(got);
  return text;
}

void require_regular_or_absent(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    fail(path, errno);
  }
  if (!S_ISREG(st.st_mode))
    throw std::runtime_error(path + ": is " + std::string(kind_of(st.st_mode)) + ", not a regular file: not replaced");
}

std::string write_temp_file(const std::string& dir, const std::string& prefix, const std::string& data) {
  std::string tmp = (fs::path(dir.empty() ? "." : dir) / ("." + prefix + ".tmp-XXXXXX")).string();
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) fail(tmp + ": cannot create", errno);
  try {
    write_all(fd, data, tmp);
  } catch (...) {
    close(fd);
    unlink(tmp.c_str());
    throw;
  }
  if (close(fd) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    fail(tmp + ": cannot write", e);
  }
  return tmp;
}

void write_file_atomic(const std::string& path, const std::string& data) {
  const fs::path target(path);
  if (target.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      throw std::runtime_error(path + ": cannot create directory " + target.parent_path().string() + ": " +
                               ec.message());
  }
  require_regular_or_absent(path);
  const std::string tmp = write_temp_file(target.parent_path().string(), target.filename().string(), data);
  // Checked again just before the rename, which would replace whatever is there.
  try {
    require_regular_or_absent(path);
  } catch (...) {
    unlink(tmp.c_str());
    throw;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    fail(path + ": cannot replace", e);
  }
}

}  // namespace scorer
