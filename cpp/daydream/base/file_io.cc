#include "daydream/base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"

namespace daydream {
namespace {

std::string OsError(int err) { return std::strerror(err); }

}  // namespace

absl::StatusOr<OpenFile> OpenRegularFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string msg = StrCat(path, ": cannot open: ", OsError(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::InvalidArgumentError(msg);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(StrCat(path, ": not a regular file"));
  }
  return OpenFile{fd, static_cast<uint64_t>(st.st_size)};
}

absl::StatusOr<size_t> ReadSome(int fd, const std::string& path, char* dst, size_t n) {
  while (true) {
    const ssize_t got = ::read(fd, dst, n);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno == EINTR) continue;
    return absl::InvalidArgumentError(StrCat(path, ": read failed: ", OsError(errno)));
  }
}

absl::StatusOr<std::string> ReadFile(const std::string& path, size_t spare_capacity) {
  DD_ASSIGN_OR_RETURN(const OpenFile file, OpenRegularFile(path));
  std::string data;
  data.reserve(static_cast<size_t>(file.size) + spare_capacity);
  data.resize(static_cast<size_t>(file.size));
  size_t done = 0;
  while (done < data.size()) {
    absl::StatusOr<size_t> n = ReadSome(file.fd, path, data.data() + done, data.size() - done);
    if (!n.ok()) {
      ::close(file.fd);
      return n.status();
    }
    if (*n == 0) break;
    done += *n;
  }
  ::close(file.fd);
  data.resize(done);
  return data;
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view data) {
  std::string tmp = StrCat(path, ".tmp.XXXXXX");
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    return absl::InvalidArgumentError(
        StrCat(path, ": cannot create a temporary file beside it: ", OsError(errno)));
  }
  auto fail = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return absl::InvalidArgumentError(StrCat(path, ": ", what, ": ", OsError(err)));
  };
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write failed", errno);
    }
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) return fail("chmod failed", errno);
  if (::fsync(fd) != 0) return fail("fsync failed", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return absl::InvalidArgumentError(StrCat(path, ": close failed: ", OsError(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return absl::InvalidArgumentError(StrCat(path, ": rename failed: ", OsError(err)));
  }
  return absl::OkStatus();
}

}  // namespace daydream
