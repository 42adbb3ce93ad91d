// The cgroup the programs are attached to, read from the file system: its id (to tell whether a
// pinned link is attached to it) and the network namespaces of the processes under it (a socket
// iterator sees one namespace's sockets, and each pod has its own).
#include "ebpf.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

namespace kpng {
namespace ebpf {

// A cgroup v2 directory's id, as bpf link info reports the cgroup of a link (libbpf finds it the same
// way); the inode number where file handles are not supported.
uint64_t CgroupId(const std::string& path) {
  alignas(8) char buf[sizeof(struct file_handle) + sizeof(uint64_t)] = {};
  auto* fh = reinterpret_cast<struct file_handle*>(buf);
  fh->handle_bytes = sizeof(uint64_t);
  int mountId;
  if (name_to_handle_at(AT_FDCWD, path.c_str(), fh, &mountId, 0) == 0 && fh->handle_bytes == sizeof(uint64_t)) {
    uint64_t id;
    memcpy(&id, fh->f_handle, sizeof(id));
    return id;
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// One /proc/PID/ns/net path per network namespace of the processes under a cgroup (recursively): a
// socket iterator sees the sockets of the namespace it was created in, and pods have their own.
void CgroupNetns(const std::string& dir, std::map<ino_t, std::string>* out, int depth) {
  if (depth > 32) return;
  std::string procs = dir + "/cgroup.procs";
  if (FILE* f = fopen(procs.c_str(), "re")) {
    long pid;
    while (fscanf(f, "%ld", &pid) == 1) {
      std::string ns = "/proc/" + std::to_string(pid) + "/ns/net";
      struct stat st;
      if (stat(ns.c_str(), &st) == 0 && !out->count(st.st_ino)) (*out)[st.st_ino] = ns;
    }
    fclose(f);
  }
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (e->d_type == DT_DIR && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) CgroupNetns(dir + "/" + e->d_name, out, depth + 1);
  }
  closedir(d);
}

}  // namespace ebpf
}  // namespace kpng
