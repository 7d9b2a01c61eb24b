// io/output_file.cpp — see output_file.h for what happens to each kind of path.
#include "toy/io/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace toy {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw std::runtime_error(path + ": " + what + (err ? std::string(": ") + std::strerror(err) : std::string()));
}

// `path` with its symbolic links followed to the last one's target, which need not exist yet.
std::string follow_links(const std::string& path) {
  std::string p = path;
  for (int hop = 0; hop < 40; ++hop) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) fail(path, "cannot read the symbolic link " + p, ec.value());
    p = target.is_absolute() ? target.string() : (fs::path(p).parent_path() / target).string();
  }
  fail(path, "cannot write", ELOOP);
}

// Writes `fill` into f, then closes it (and with it fd); the errno of the first failure, 0 when all went well.
int write_and_close(int fd, const std::function<bool(std::FILE*)>& fill, bool sync) {
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    const int err = errno;
    ::close(fd);
    return err;
  }
  errno = 0;
  bool ok = fill(f) && std::fflush(f) == 0 && (!sync || ::fsync(fd) == 0);
  int err = ok ? 0 : (errno ? errno : EIO);
  if (std::fclose(f) != 0 && ok) err = errno;
  return err;
}

// A FIFO or a device: the node is what the user asked to write to (a reader, /dev/null).
void write_in_place(const std::string& shown, const std::string& path, const std::function<bool(std::FILE*)>& fill) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);  // a FIFO waits here for its reader
  if (fd < 0) fail(shown, "cannot open for writing", errno);
  if (const int err = write_and_close(fd, fill, /*sync=*/false)) fail(shown, "write failed", err);
}

// A regular file or none: a unique temporary beside it, renamed over it once complete.
void write_replacing(const std::string& shown, const std::string& path, const struct stat* old,
                     const std::function<bool(std::FILE*)>& fill) {
  static std::atomic<unsigned> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // never an existing file or link
    if (fd < 0 && (errno != EEXIST || attempt >= 100)) fail(shown, "cannot create " + tmp, errno);
  }
  if (old && ::fchmod(fd, old->st_mode & 07777) != 0) {  // the replaced file's permissions
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(shown, "cannot set the permissions of " + tmp, err);
  }
  int err = write_and_close(fd, fill, /*sync=*/true);
  if (!err && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    fail(shown, "write failed", err);
  }
}

}  // namespace

void write_output_file(const std::string& path, const std::function<bool(std::FILE*)>& fill) {
  if (path.empty()) throw std::runtime_error("cannot write a file with an empty name");
  const std::string target = follow_links(path);
  struct stat st;
  if (::stat(target.c_str(), &st) != 0) return write_replacing(path, target, nullptr, fill);
  if (S_ISDIR(st.st_mode)) fail(path, "cannot write", EISDIR);
  if (S_ISREG(st.st_mode)) return write_replacing(path, target, &st, fill);
  write_in_place(path, target, fill);
}

void write_output_file(const std::string& path, std::string_view bytes) {
  write_output_file(path, [&](std::FILE* f) { return std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size(); });
}

}  // namespace toy
