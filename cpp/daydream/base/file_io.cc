#include "daydream/base/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <mutex>

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

namespace {

uint64_t PageBytes() {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}
uint64_t PageDown(uint64_t offset) { return offset / PageBytes() * PageBytes(); }
uint64_t PageUp(uint64_t offset) { return PageDown(offset + PageBytes() - 1); }

// A copy out of a mapping in progress on this thread (MappedFile::CopyOut):
// where a SIGBUS at an address in [begin, end) jumps to. Initial-exec, so
// that the handler reads it without a call that could allocate.
struct ActiveCopy {
  const char* begin;
  const char* end;
  sigjmp_buf jump;
};
// (volatile: the stores around the copy are for the handler, which the compiler does not see.)
__attribute__((tls_model("initial-exec"))) thread_local ActiveCopy* volatile t_active_copy = nullptr;
struct sigaction g_previous_bus {};

// Set while this thread runs OnBus: a handler that OnBus passed a fault to
// and that passes it back (it found OnBus installed when it was) must not
// loop.
__attribute__((tls_model("initial-exec"))) thread_local volatile bool t_in_bus_handler = false;

void OnBus(int sig, siginfo_t* info, void* context) {
  const ActiveCopy* copy = t_active_copy;
  const char* at = static_cast<const char*>(info->si_addr);
  // Only a fault the kernel raised has an address (si_code > 0); a SIGBUS
  // another process sent does not.
  if (info->si_code > 0 && copy != nullptr && at >= copy->begin && at < copy->end) {
    siglongjmp(t_active_copy->jump, 1);
  }
  // Not a copy's fault: as the action before OnBus would have taken it.
  const struct sigaction& before = g_previous_bus;
  if (t_in_bus_handler || before.sa_handler == SIG_DFL || before.sa_handler == SIG_IGN) {
    const bool sent = info->si_code <= 0;
    if (sent && before.sa_handler == SIG_IGN && !t_in_bus_handler) return;
    ::signal(sig, SIG_DFL);
    // A fault recurs on return, and takes the default action; a sent signal
    // is raised again, delivered once this handler returns.
    if (sent) ::raise(sig);
    return;
  }
  t_in_bus_handler = true;
  if ((before.sa_flags & SA_SIGINFO) != 0) {
    before.sa_sigaction(sig, info, context);
  } else {
    before.sa_handler(sig);
  }
  t_in_bus_handler = false;
}

// OnBus is SIGBUS's handler while any MappedFile lives (counted under the
// mutex): installed by the first, and what was there before put back by the
// last, unless something else took SIGBUS meanwhile. (A handler installed
// once for good would not last: test frameworks and Python's faulthandler
// install their own, and put back what they found, which was not always
// OnBus.)
std::mutex g_bus_mutex;
int g_bus_users = 0;

void HoldBusHandler() {
  std::lock_guard<std::mutex> lock(g_bus_mutex);
  if (g_bus_users++ > 0) return;
  // What was there, kept before OnBus can run and pass a fault to it.
  ::sigaction(SIGBUS, nullptr, &g_previous_bus);
  struct sigaction action {};
  action.sa_sigaction = OnBus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, nullptr);
}

void ReleaseBusHandler() {
  std::lock_guard<std::mutex> lock(g_bus_mutex);
  if (--g_bus_users > 0) return;
  struct sigaction current {};
  ::sigaction(SIGBUS, nullptr, &current);
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == OnBus) {
    ::sigaction(SIGBUS, &g_previous_bus, nullptr);
  }
}

}  // namespace

absl::StatusOr<MappedFile> MappedFile::Map(int fd, uint64_t size, const std::string& path) {
#if defined(__linux__) && defined(MADV_POPULATE_READ)
  if (size == 0) return absl::InvalidArgumentError(StrCat(path, ": an empty file cannot be mapped"));
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return absl::InvalidArgumentError(StrCat(path, ": cannot map: ", OsError(errno)));
  MappedFile file;
  file.data_ = static_cast<const char*>(p);
  file.size_ = static_cast<size_t>(size);
  file.path_ = path;
  HoldBusHandler();
  file.holds_handler_ = true;
  // The first page tells whether this kernel populates ranges at all.
  if (file.Advise(0, PageBytes(), MADV_POPULATE_READ) != 0 && errno == EINVAL) {
    return absl::UnimplementedError(StrCat(path, ": this kernel does not populate mapped ranges"));
  }
  return file;
#else
  (void)fd;
  (void)size;
  return absl::UnimplementedError(StrCat(path, ": files are not mapped on this platform"));
#endif
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Unmap();
    holds_handler_ = std::exchange(other.holds_handler_, false);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() { Unmap(); }

void MappedFile::Unmap() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  data_ = nullptr;
  if (holds_handler_) ReleaseBusHandler();
  holds_handler_ = false;
}

bool MappedFile::CopyOut(uint64_t from, char* dst, size_t n) const {
  ActiveCopy copy{data_ + from, data_ + from + n, {}};
  // (The signal mask saved and restored: the jump leaves the handler with SIGBUS blocked.)
  if (sigsetjmp(copy.jump, /*savemask=*/1) != 0) {
    t_active_copy = nullptr;
    return false;
  }
  t_active_copy = &copy;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(dst, data_ + from, n);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_active_copy = nullptr;
  return true;
}

absl::Status MappedFile::Populate(uint64_t from, uint64_t to) {
#if defined(__linux__) && defined(MADV_POPULATE_READ)
  to = std::min<uint64_t>(to, size_);
  if (from >= to) return absl::OkStatus();
  while (Advise(PageDown(from), to, MADV_POPULATE_READ) != 0) {
    const int err = errno;
    if (err == EINTR || err == EAGAIN) continue;
    if (err == EFAULT) {
      return absl::InvalidArgumentError(StrCat(path_, ": read failed: the file no longer holds bytes ", from, " to ",
                                               to, " of the ", size_, " it held when opened (truncated while read?),",
                                               " or they could not be read"));
    }
    return absl::InvalidArgumentError(StrCat(path_, ": read failed at byte ", from, ": ", OsError(err)));
  }
#else
  (void)from;
  (void)to;
#endif
  return absl::OkStatus();
}

void MappedFile::Prefetch(uint64_t from, uint64_t to) const {
  Advise(PageDown(from), to, MADV_WILLNEED);
}

void MappedFile::Release(uint64_t from, uint64_t to) const {
  // Only pages wholly inside the range (the file's last page counts as
  // whole): the ones at its edges may hold bytes still to read.
  Advise(PageUp(from), to >= size_ ? size_ : PageDown(to), MADV_DONTNEED);
}

int MappedFile::Advise(uint64_t from, uint64_t to, int advice) const {
  // The mapping starts on a page: `from` on one is too; madvise takes `to` up to the page's end.
  to = std::min<uint64_t>(to, size_);
  if (from >= to) return 0;
  return ::madvise(const_cast<char*>(data_) + from, static_cast<size_t>(to - from), advice);
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
