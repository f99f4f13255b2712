#include "pidns.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace nas {

// Linux nests PID namespaces at most 32 deep.
static const int MAX_DEPTH = 33;

std::vector<std::string> pid_namespaces(pid_t pid) {
  std::vector<std::string> out;
  char link[64];
  snprintf(link, sizeof link, "/proc/%d/ns/pid", pid);
  int fd = open(link, O_RDONLY | O_CLOEXEC);
  for (int depth = 0; fd >= 0 && depth < MAX_DEPTH; depth++) {
    struct stat st;
    if (fstat(fd, &st) == 0) out.push_back("pid:[" + std::to_string(st.st_ino) + "]");
    // EPERM at nasd's own namespace: what is above it is not nasd's to see.
    int parent = ioctl(fd, NS_GET_PARENT);
    close(fd);
    fd = parent;
  }
  if (fd >= 0) close(fd);
  return out;
}

}  // namespace nas
