#include "flotilla/identity/secret_file.h"

#include <cerrno>
#include <cstdio>

#include <fcntl.h>
#include <unistd.h>

#include "flotilla/core/errno_text.h"
#include "flotilla/core/util.h"

namespace flotilla::identity {

Status writeSecretFile(const std::string& path, std::string_view content) {
  std::string temp = path + ".tmp-" + randomHex(4);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return fail(ErrorKind::kPermanent, "cannot create " + temp + ": " + errnoText(errno));
  }
  size_t written = 0;
  while (written < content.size()) {
    ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      int error = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      return fail(ErrorKind::kPermanent, "cannot write " + temp + ": " + errnoText(error));
    }
    written += static_cast<size_t>(n);
  }
  int error = ::fsync(fd) == 0 ? 0 : errno;
  if (::close(fd) != 0 && error == 0) {
    error = errno;
  }
  if (error != 0) {
    ::unlink(temp.c_str());
    return fail(ErrorKind::kPermanent, "cannot write " + temp + ": " + errnoText(error));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    error = errno;
    ::unlink(temp.c_str());
    return fail(ErrorKind::kPermanent, "cannot rename " + temp + " to " + path + ": " + errnoText(error));
  }
  return {};
}

}  // namespace flotilla::identity
