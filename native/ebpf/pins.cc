// The pin directory under bpffs and what lives in it: the directory made (bpffs mounted when
// missing), locked so that two kpngs never undo each other's pins, and each pin checked before an open
// takes it over: a map of another layout, a link severed or attached elsewhere, a pin this object does
// not own. An open reuses what passes (a restart keeps connections balanced) and replaces the rest.
#include "ebpf.h"

#include <dirent.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

namespace kpng {
namespace ebpf {

namespace {

bool IsBpffs(const std::string& p) {
  struct statfs st;
  return statfs(p.c_str(), &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

// The process holding a flock on this file, from /proc/locks ("1: FLOCK  ADVISORY  WRITE PID
// MAJ:MIN:INO 0 EOF"; 0: not found), to name it in the error.
long FlockHolder(const struct stat& st) {
  FILE* f = fopen("/proc/locks", "re");
  if (!f) return 0;
  char line[256];
  long pid = 0;
  while (!pid && fgets(line, sizeof(line), f)) {
    char kind[16];
    long p;
    unsigned maj, min;
    unsigned long ino;
    if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%lu", kind, &p, &maj, &min, &ino) == 5 && strcmp(kind, "FLOCK") == 0 &&
        maj == major(st.st_dev) && min == minor(st.st_dev) && ino == st.st_ino) pid = p;
  }
  fclose(f);
  return pid;
}

}  // namespace

// Makes pinDir a directory on bpffs, mounting bpffs at /sys/fs/bpf when pinDir is below it and it is
// not mounted. Returns 0 or an errno, with a message.
int EnsurePinDir(const std::string& pinDir, std::string* msg) {
  const std::string root = "/sys/fs/bpf";
  if (pinDir.rfind(root + "/", 0) == 0 && !IsBpffs(root)) {
    if (mount("bpf", root.c_str(), "bpf", 0, "mode=0700") != 0) { *msg = "mount bpffs at " + root; return errno; }
  }
  size_t s = pinDir.rfind('/');
  std::string parent = s == 0 ? "/" : pinDir.substr(0, s);
  if (!IsBpffs(parent)) { *msg = parent + " is not on a bpf filesystem"; return ENOTSUP; }
  if (mkdir(pinDir.c_str(), 0700) != 0 && errno != EEXIST) { *msg = "mkdir " + pinDir; return errno; }
  return 0;
}

bool Exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

// What a BPF descriptor is: "anon_inode:bpf-map", "anon_inode:bpf-link", "anon_inode:bpf-prog" (some
// kernels name links "bpf_link": read with '-'). A pinned object's info must be read with the struct
// of its kind, and a pin's name says nothing sure.
std::string FdKind(int fd) {
  char buf[64];
  ssize_t n = readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof(buf) - 1);
  std::string k = n > 0 ? std::string(buf, n) : "";
  for (size_t i = k.find(':'); i != std::string::npos && i < k.size(); i++) if (k[i] == '_') k[i] = '-';
  return k;
}

// Locks the pin directory (its descriptor fd) for this process until fd closes: 0, else EBUSY with
// the holder's pid in *holder (0: not found) when another process holds it, or flock's errno.
int LockPinDir(int fd, long* holder) {
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
  int err = errno == EWOULDBLOCK ? EBUSY : errno;
  struct stat ds;
  *holder = fstat(fd, &ds) == 0 ? FlockHolder(ds) : 0;
  return err;
}

// Why a pinned map cannot be reused by this object's map m ("" when it can): the kernel would reject
// the object's load (libbpf compares the same fields), so such a pin is replaced instead.
std::string MapMismatch(const std::string& pin, bpf_map* m) {
  UniqueFd fd(bpf_obj_get(pin.c_str()));
  if (fd < 0) return std::string("cannot be opened (") + strerror(errno) + ")";
  std::string kind = FdKind(fd);
  if (kind != "anon_inode:bpf-map") return "is no map (" + kind + ")";
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return std::string("has no map info (") + strerror(errno) + ")";
  std::string d;
  auto diff = [&](const char* what, uint64_t have, uint64_t want) {
    if (have != want) d += (d.empty() ? "" : ", ") + std::string(what) + " " + std::to_string(have) + " (this object: " + std::to_string(want) + ")";
  };
  diff("type", info.type, bpf_map__type(m));
  diff("key size", info.key_size, bpf_map__key_size(m));
  diff("value size", info.value_size, bpf_map__value_size(m));
  diff("max entries", info.max_entries, bpf_map__max_entries(m));
  diff("flags", info.map_flags, bpf_map__map_flags(m));
  return d.empty() ? "" : "has " + d;
}

// Whether a pinned link can be pointed at a new program as it is ("" when it can), else why not; the
// link is kept in *old when it may still be attached somewhere (detached once its replacement is
// pinned). *progId: the program it runs.
std::string LinkMismatch(const std::string& pin, uint64_t cgroupId, bpf_attach_type want, UniqueFd* old, uint32_t* progId) {
  UniqueFd fd(bpf_obj_get(pin.c_str()));
  if (fd < 0) return std::string("cannot be opened (") + strerror(errno) + ")";
  std::string kind = FdKind(fd);
  if (kind != "anon_inode:bpf-link") return "is no link (" + kind + ")";
  bpf_link_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return std::string("has no link info (") + strerror(errno) + ")";
  if (info.type != BPF_LINK_TYPE_CGROUP) { *old = std::move(fd); return "is a link of type " + std::to_string(info.type) + ", not a cgroup link"; }
  *progId = info.prog_id;
  // The kernel severs a cgroup link when its cgroup is removed: it stays pinned but attached nowhere,
  // and can no longer be updated (ENOLINK).
  if (info.cgroup.cgroup_id == 0) return "is severed (the cgroup it was attached to was removed)";
  *old = std::move(fd);
  if (info.cgroup.cgroup_id != cgroupId) return "is attached to another cgroup (id " + std::to_string(info.cgroup.cgroup_id) + "; this one's is " + std::to_string(cgroupId) + ")";
  if (info.cgroup.attach_type != want) return "has attach type " + std::to_string(info.cgroup.attach_type) + " (this program's: " + std::to_string(want) + ")";
  old->reset();
  return "";
}

// Whether the program with this id is the same build as the program fd (the kernel's tag: a hash of
// the instructions).
bool SameProgram(uint32_t id, int fd) {
  UniqueFd other(bpf_prog_get_fd_by_id(id));
  if (other < 0) return false;
  bpf_prog_info a{}, b{};
  uint32_t la = sizeof(a), lb = sizeof(b);
  if (bpf_obj_get_info_by_fd(other, &a, &la) != 0 || bpf_obj_get_info_by_fd(fd, &b, &lb) != 0) return false;
  return memcmp(a.tag, b.tag, sizeof(a.tag)) == 0;
}

// Pins link l as link_<name>: under another name first, then renamed over the old pin, so the pin
// never names nothing (bpffs refuses dots in names). 0 or an errno, with what failed.
int PinLink(bpf_link* l, const std::string& pinDir, const std::string& name, std::string* what) {
  std::string pin = pinDir + "/link_" + name;
  std::string tmp = pinDir + "/new_link_" + name;
  unlink(tmp.c_str());
  if (bpf_obj_pin(bpf_link__fd(l), tmp.c_str()) != 0) { int err = errno; *what = "pin " + tmp; return err; }
  if (rename(tmp.c_str(), pin.c_str()) != 0) { int err = errno; *what = "rename " + tmp + " to " + pin; unlink(tmp.c_str()); return err; }
  return 0;
}

// Pins this object does not own (a program or map an older build had, a leftover of an interrupted
// replacement): links among them are detached (the caller has attached this object's links by then),
// and every such pin is removed; one line in *found for each.
void RemoveStrangers(const std::string& pinDir, const std::set<std::string>& names, std::vector<std::string>* found) {
  DIR* d = opendir(pinDir.c_str());
  if (!d) return;
  std::vector<std::string> strangers;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != ".." && !names.count(n)) strangers.push_back(n);
  }
  closedir(d);
  for (const std::string& n : strangers) {
    std::string p = pinDir + "/" + n;
    UniqueFd fd(bpf_obj_get(p.c_str()));
    std::string kind = fd >= 0 ? FdKind(fd) : "";
    if (kind == "anon_inode:bpf-link") bpf_link_detach(fd);
    bool gone = unlink(p.c_str()) == 0;
    found->push_back(n + " (" + (kind.empty() ? "unknown" : kind.substr(kind.find(':') + 1)) + ") is not in this object: " +
                     (gone ? "detached and removed" : std::string("could not be removed (") + strerror(errno) + ")"));
  }
}

}  // namespace ebpf
}  // namespace kpng
