// eBPF socket load balancing through libbpf: load native/bpf/sock_lb.bpf.c's object, attach its cgroup
// programs, pin maps and links under a bpffs directory (reused on the next start, so a restart keeps
// connections balanced), batched map updates / deletes, map dumps, and clean-up. Every kernel call runs
// in an AsyncWorker; a loaded object lives in a handle owned by this file.
//   ebpfOpen({cgroup, pinDir, object?, mapEntries?, prealloc?, hostNetnsOnly?, netns?, socketDestroy?})
//       -> {handle, object, reusedMaps, reusedLinks, pendingLinks, programs, found, hostNetns, socketDestroyOff}
//       mapEntries: max entries of kpng_svc and kpng_be (0: the object's own)
//       prealloc: kpng_svc and kpng_be allocate all their entries at creation (no BPF_F_NO_PREALLOC)
//       hostNetnsOnly: balance only sockets of the host network namespace (netns: its path; default
//       this process's), whose cookie is returned as hostNetns (0: every namespace is balanced)
//       socketDestroy: false leaves the socket iterators out as on a kernel without them
//       socketDestroyOff: why sockets of removed backends cannot be destroyed ("" when they can)
//       found: one line per pin that could not be taken over as it was, and what was done with it
//       (a severed link, a link to another cgroup, a map of another layout, a stale pin...).
//       The pin directory is flock()ed for the handle's life: a second kpng on it fails with EBUSY.
//   ebpfMapApply(handle, [{map, op: 'update'|'delete', count, keys: Buffer, values?: Buffer}])
//       -> {syscalls, ms}; on failure rejects with {group, element, errno, code, syscalls}
//   ebpfMapDump(handle, map) -> {count, keys: Buffer, values: Buffer, syscalls}
//   ebpfDestroySockets(handle, gone: Buffer, count) -> {tcp, udp, namespaces, syscalls, ms}: destroys the
//       sockets the programs connected to these removed backends (kpng_gone keys), through the iter/tcp
//       and iter/udp programs
//   ebpfSevered(handle) -> [program]  (synchronous) the programs whose links the kernel severed (their
//       cgroup was removed): nothing runs them any more
//   ebpfActivate(handle) -> n         (synchronous) points the pinned links an open left on the previous
//       programs (it replaced maps: pendingLinks) at this object's programs, once their maps are filled
//   ebpfClose(handle)                 closes descriptors; pinned links keep the programs attached
//   ebpfCleanup({pinDir})             detaches pinned links, removes every pin and the directory; EBUSY
//       while a kpng holds the directory's lock
#include "common.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <dlfcn.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

namespace kpng {

namespace {

struct Loaded {
  bpf_object* obj = nullptr;
  std::string cgroup;
  std::vector<bpf_link*> links;
  std::vector<std::string> linkNames;   // the program of each link
  // Links left on the previous programs (and their maps) until this object's maps are filled.
  std::vector<std::pair<bpf_link*, bpf_program*>> pending;
  int lockFd = -1;   // the pin directory, flock()ed while this handle lives
  bool hostOnly = false;     // only the host network namespace's sockets are balanced
  std::string hostNetns;     // its path ("": this process's)
  ~Loaded() {
    for (bpf_link* l : links) bpf_link__destroy(l);  // pinned links stay attached
    if (obj) bpf_object__close(obj);
    if (lockFd >= 0) close(lockFd);
  }
};

std::mutex g_mu;
std::map<int, std::shared_ptr<Loaded>> g_handles;
int g_next = 1;

std::shared_ptr<Loaded> Find(int h) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_handles.find(h);
  return it == g_handles.end() ? nullptr : it->second;
}

// libbpf's messages for the failing call, instead of stderr.
thread_local std::string t_log;
int LibbpfPrint(enum libbpf_print_level level, const char* fmt, va_list ap) {
  if (level == LIBBPF_DEBUG) return 0;
  char buf[8192];
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  if (t_log.size() < 16384) t_log += buf;
  return n;
}

// The directory of this addon (the .o sits beside the .node file).
std::string AddonDir() {
  Dl_info di;
  if (dladdr(reinterpret_cast<void*>(&AddonDir), &di) == 0 || !di.dli_fname) return ".";
  std::string p(di.dli_fname);
  size_t s = p.rfind('/');
  return s == std::string::npos ? "." : p.substr(0, s);
}

bool IsBpffs(const std::string& p) {
  struct statfs st;
  return statfs(p.c_str(), &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

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

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

// The cookie of a network namespace (path; "": this thread's), as bpf_get_netns_cookie() sees it from
// a socket of that namespace. 0 and an errno with a message on failure.
uint64_t NetnsCookie(const std::string& netns, int* err, std::string* what) {
  NetnsGuard g(netns);
  if (g.error()) { *err = g.error(); *what = "enter the network namespace " + netns; return 0; }
  UniqueFd s(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (s < 0) { *err = errno; *what = "socket"; return 0; }
  uint64_t cookie = 0;
  socklen_t len = sizeof(cookie);
  if (getsockopt(s, SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) != 0) {
    *err = errno;
    *what = "read the host network namespace's cookie (SO_NETNS_COOKIE, kernel >= 5.14)";
    return 0;
  }
  return cookie;
}

// Why this kernel cannot destroy sockets from a socket iterator ("" when it can): the kfunc and the
// tcp and udp iterator targets are looked up in its BTF, as libbpf would at load.
std::string SockDestroyMissing() {
  btf* vm = btf__load_vmlinux_btf();
  if (!vm) return std::string("the kernel's BTF cannot be read (") + strerror(errno) + ")";
  std::string missing;
  for (const char* f : {"bpf_sock_destroy", "bpf_iter_tcp", "bpf_iter_udp"}) {
    if (btf__find_by_name_kind(vm, f, BTF_KIND_FUNC) < 0) missing += std::string(missing.empty() ? "" : ", ") + f;
  }
  btf__free(vm);
  return missing.empty() ? "" : "the kernel lacks " + missing + " (kernel >= 6.5)";
}

// Sets a __u64 `const volatile` of the object's .rodata before the load. Returns 0 or an errno.
int SetRodataU64(bpf_object* obj, const std::string& var, uint64_t v, std::string* what) {
  bpf_map* m = nullptr;
  bpf_map* it;
  bpf_object__for_each_map(it, obj) {
    std::string n = bpf_map__name(it);
    if (bpf_map__is_internal(it) && n.size() >= 7 && n.compare(n.size() - 7, 7, ".rodata") == 0) m = it;
  }
  const btf* b = bpf_object__btf(obj);
  int sec = b ? btf__find_by_name_kind(b, ".rodata", BTF_KIND_DATASEC) : -1;
  size_t size = 0;
  const char* data = m ? static_cast<const char*>(bpf_map__initial_value(m, &size)) : nullptr;
  if (sec < 0 || !data) { *what = "the object has no .rodata with " + var; return ENOENT; }
  const btf_type* t = btf__type_by_id(b, sec);
  const btf_var_secinfo* vs = btf_var_secinfos(t);
  for (int i = 0; i < btf_vlen(t); i++) {
    const btf_type* vt = btf__type_by_id(b, vs[i].type);
    if (var != btf__name_by_offset(b, vt->name_off)) continue;
    if (vs[i].size != sizeof(v) || vs[i].offset + sizeof(v) > size) { *what = var + " is not a __u64"; return EINVAL; }
    std::vector<char> init(data, data + size);
    memcpy(init.data() + vs[i].offset, &v, sizeof(v));
    if (bpf_map__set_initial_value(m, init.data(), size) != 0) { *what = "set " + var; return errno ? errno : EINVAL; }
    return 0;
  }
  *what = "the object's .rodata has no " + var;
  return ENOENT;
}

// The socket iterators, each run by DestroyWorker.
const char* const kIterPrograms[] = {"kpng_destroy_tcp", "kpng_destroy_udp"};
// kpng_gone's key (struct gone_key in sock_lb.bpf.c): the protocol tells which iterator to run.
struct GoneKey {
  uint8_t addr[16]; uint16_t port; uint8_t family, pad; uint8_t vip[16]; uint16_t vport; uint8_t proto, pad2;
};
static_assert(sizeof(GoneKey) == 40, "kpng_gone key layout");

class OpenWorker : public Napi::AsyncWorker {
 public:
  OpenWorker(Napi::Env env, std::string cgroup, std::string pinDir, std::string object, uint32_t mapEntries,
             bool prealloc, bool hostNetnsOnly, std::string netns, bool socketDestroy)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), cgroup_(std::move(cgroup)),
        pinDir_(std::move(pinDir)), object_(std::move(object)), mapEntries_(mapEntries), prealloc_(prealloc), hostNetnsOnly_(hostNetnsOnly),
        netns_(std::move(netns)), socketDestroy_(socketDestroy) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    t_log.clear();
    Run();
    log_ = t_log;   // libbpf wrote to this worker thread's buffer
  }

  void Run() {
    if (object_.empty()) object_ = AddonDir() + "/sock_lb.bpf.o";
    if ((err_ = EnsurePinDir(pinDir_, &what_))) return;
    auto st = std::make_shared<Loaded>();
    // Two kpngs on one pin directory would undo each other's links and maps: the directory itself is
    // locked (bpffs holds no regular files), until this handle closes or the process ends.
    st->lockFd = open(pinDir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (st->lockFd < 0) { err_ = errno; what_ = "open " + pinDir_; return; }
    if (flock(st->lockFd, LOCK_EX | LOCK_NB) != 0) {
      err_ = errno == EWOULDBLOCK ? EBUSY : errno;
      struct stat ds;
      long pid = fstat(st->lockFd, &ds) == 0 ? FlockHolder(ds) : 0;
      what_ = "lock " + pinDir_ + ": held by another kpng" + (pid ? " (pid " + std::to_string(pid) + ")" : "") + "; it is taken over once that one exits";
      return;
    }
    st->obj = bpf_object__open_file(object_.c_str(), nullptr);
    if (!st->obj) { st->obj = nullptr; err_ = errno ? errno : ENOENT; what_ = "open " + object_; return; }
    if (hostNetnsOnly_) {
      hostNetns_ = NetnsCookie(netns_, &err_, &what_);
      if (err_) return;
    }
    // Set at every load, never pinned: a restart with the pins kept still takes the current setting.
    if ((err_ = SetRodataU64(st->obj, "kpng_host_netns", hostNetns_, &what_))) return;
    // Without the kfunc or the iterator targets libbpf would refuse the whole object: the iterators
    // stay out and the socket LB runs without destroying sockets.
    socketDestroyOff_ = socketDestroy_ ? SockDestroyMissing() : "turned off (KPNG_EBPF_NO_SOCKET_DESTROY)";
    if (!socketDestroyOff_.empty()) {
      for (const char* n : kIterPrograms) {
        if (bpf_program* ip = bpf_object__find_program_by_name(st->obj, n)) bpf_program__set_autoload(ip, false);
      }
    }
    std::set<std::string> names;   // the pins this object owns
    int replacedMaps = 0;
    bpf_map* m;
    bpf_object__for_each_map(m, st->obj) {
      if (bpf_map__is_internal(m)) continue;   // .rodata: set above for this load, not shared
      std::string name = bpf_map__name(m);
      std::string pin = pinDir_ + "/" + name;
      names.insert(name);
      if (name == "kpng_svc" || name == "kpng_be") {
        if (mapEntries_) bpf_map__set_max_entries(m, mapEntries_);
        // Preallocated: an update takes an element from the map's free list instead of allocating one
        // (a third of the kernel's time per entry), for memory that is held whether used or not.
        if (prealloc_) bpf_map__set_map_flags(m, bpf_map__map_flags(m) & ~BPF_F_NO_PREALLOC);
      }
      if (Exists(pin)) {
        // A map of another layout or size (another build of the object, or --ebpf-map-entries changed):
        // libbpf would refuse the whole load. The pin goes and this object's new map is pinned in its
        // place; programs still attached keep the old map until their links are pointed at the new ones.
        std::string why = MapMismatch(pin, m);
        if (why.empty()) reusedMaps_++;
        else {
          replacedMaps++;
          if (unlink(pin.c_str()) != 0) { err_ = errno; what_ = "unlink " + pin; return; }
          found_.push_back("map " + name + " " + why + ": replaced by an empty map (filled by the next full sync)");
        }
      }
      bpf_map__set_pin_path(m, pin.c_str());
    }
    // Reuses the pinned maps, pins the new ones.
    if (bpf_object__load(st->obj) != 0) { err_ = errno ? errno : EINVAL; what_ = "load " + object_; return; }
    UniqueFd cg(open(cgroup_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (cg < 0) { err_ = errno; what_ = "open cgroup " + cgroup_; return; }
    uint64_t cgid = CgroupId(cgroup_);
    int otherBuild = 0;
    std::map<std::string, std::vector<std::string>> linkWhy;   // why a pinned link was replaced: its pins
    bpf_program* p;
    bpf_object__for_each_program(p, st->obj) {
      // Only the cgroup programs are attached here; the socket iterator runs on demand (DestroyWorker).
      if (std::string(bpf_program__section_name(p)).rfind("cgroup/", 0) != 0) continue;
      std::string name = bpf_program__name(p);
      std::string pin = pinDir_ + "/link_" + name;
      names.insert("link_" + name);
      programs_.push_back(name);
      bpf_link* l = nullptr;
      UniqueFd old;   // a link to end once its replacement is pinned
      if (Exists(pin)) {
        uint32_t progId = 0;
        std::string why = LinkMismatch(pin, cgid, bpf_program__expected_attach_type(p), &old, &progId);
        if (why.empty()) {
          // The pinned link kept the program attached across the restart: point it at this program
          // without a moment unattached. When maps were replaced, this program's maps are still
          // empty while the old program's hold the last state: the update waits for ebpfActivate,
          // after the first full sync filled them.
          bool same = SameProgram(progId, bpf_program__fd(p));
          l = bpf_link__open(pin.c_str());
          if (l && replacedMaps) {
            st->pending.push_back({l, p});
            reusedLinks_++;
            if (!same) otherBuild++;
          } else if (l && bpf_link__update_program(l, p) != 0) {
            why = std::string("could not be updated (") + strerror(errno) + ")";
            bpf_link__destroy(l);
            l = nullptr;
          } else if (l) {
            reusedLinks_++;
            if (!same) otherBuild++;
          } else {
            why = std::string("could not be opened (") + strerror(errno) + ")";
          }
        }
        if (!l) linkWhy[why].push_back("link_" + name);
      }
      if (!l) {
        l = bpf_program__attach_cgroup(p, cg);
        if (!l) { err_ = errno; what_ = "attach " + name + " to " + cgroup_; return; }
        // Pinned under another name, then renamed over the old pin: the pin never names nothing.
        // (bpffs refuses dots in names.)
        std::string tmp = pinDir_ + "/new_link_" + name;
        unlink(tmp.c_str());
        if (bpf_obj_pin(bpf_link__fd(l), tmp.c_str()) != 0) { err_ = errno; what_ = "pin " + tmp; bpf_link__destroy(l); return; }
        if (rename(tmp.c_str(), pin.c_str()) != 0) { err_ = errno; what_ = "rename " + tmp + " to " + pin; unlink(tmp.c_str()); bpf_link__destroy(l); return; }
        // The new link runs: the old one (another cgroup, another attach type) can end.
        if (old >= 0) bpf_link_detach(old);
      }
      st->links.push_back(l);
      st->linkNames.push_back(name);
    }
    for (const auto& w : linkWhy) {
      std::string pins;
      for (const std::string& n : w.second) pins += (pins.empty() ? "" : ", ") + n;
      found_.push_back(pins + (w.second.size() == 1 ? " " : " each ") + w.first + ": replaced by a new link on " + cgroup_);
    }
    if (otherBuild) found_.push_back(std::to_string(otherBuild) + " pinned links ran programs of another build: updated in place" + (replacedMaps ? " once the new maps are filled" : ""));
    RemoveStrangers(names);
    st->cgroup = cgroup_;
    st->hostOnly = hostNetnsOnly_;
    st->hostNetns = netns_;
    pendingLinks_ = st->pending.size();
    std::lock_guard<std::mutex> lk(g_mu);
    handle_ = g_next++;
    g_handles[handle_] = st;
  }

  // Pins this object does not own (a program or map an older build had, a leftover of an interrupted
  // replacement): links among them are detached, after this object's links were attached, and every
  // such pin is removed.
  void RemoveStrangers(const std::set<std::string>& names) {
    DIR* d = opendir(pinDir_.c_str());
    if (!d) return;
    std::vector<std::string> strangers;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != ".." && !names.count(n)) strangers.push_back(n);
    }
    closedir(d);
    for (const std::string& n : strangers) {
      std::string p = pinDir_ + "/" + n;
      UniqueFd fd(bpf_obj_get(p.c_str()));
      std::string kind = fd >= 0 ? FdKind(fd) : "";
      if (kind == "anon_inode:bpf-link") bpf_link_detach(fd);
      bool gone = unlink(p.c_str()) == 0;
      found_.push_back(n + " (" + (kind.empty() ? "unknown" : kind.substr(kind.find(':') + 1)) + ") is not in this object: " +
                       (gone ? "detached and removed" : std::string("could not be removed (") + strerror(errno) + ")"));
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (err_) {
      Napi::Error e = MakeErrnoError(env, err_, what_);
      if (!log_.empty()) e.Value().Set("libbpf", log_);
      deferred_.Reject(e.Value());
      return;
    }
    Napi::Object o = Napi::Object::New(env);
    o.Set("handle", handle_);
    o.Set("object", object_);
    o.Set("reusedMaps", reusedMaps_);
    o.Set("reusedLinks", reusedLinks_);
    o.Set("pendingLinks", pendingLinks_);
    Napi::Array progs = Napi::Array::New(env, programs_.size());
    for (size_t i = 0; i < programs_.size(); i++) progs[i] = Napi::String::New(env, programs_[i]);
    o.Set("programs", progs);
    Napi::Array found = Napi::Array::New(env, found_.size());
    for (size_t i = 0; i < found_.size(); i++) found[i] = Napi::String::New(env, found_[i]);
    o.Set("found", found);
    o.Set("hostNetns", (double)hostNetns_);
    o.Set("socketDestroyOff", socketDestroyOff_);
    deferred_.Resolve(o);
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::string cgroup_, pinDir_, object_, what_, log_;
  std::vector<std::string> programs_, found_;
  int err_ = 0, handle_ = 0, reusedMaps_ = 0, reusedLinks_ = 0, pendingLinks_ = 0;
  uint32_t mapEntries_;
  bool prealloc_;
  bool hostNetnsOnly_;
  std::string netns_;
  bool socketDestroy_;
  uint64_t hostNetns_ = 0;
  std::string socketDestroyOff_;
};

// One batched update or delete. The keys and values are read in place from the caller's Buffers,
// which the group holds (references, released on the main thread with the worker) until it is done:
// a full sync's batches are tens of MB, not copied.
struct Group {
  std::string map;
  bool update = true;
  uint32_t count = 0;
  Napi::Reference<Napi::Buffer<uint8_t>> keysRef, valuesRef;
  const uint8_t* keys = nullptr;
  size_t keysLen = 0;
  const uint8_t* values = nullptr;
  size_t valuesLen = 0;
};

int MapFd(Loaded* st, const std::string& name, std::string* what) {
  bpf_map* m = bpf_object__find_map_by_name(st->obj, name.c_str());
  if (!m) { *what = "no map " + name; return -ENOENT; }
  return bpf_map__fd(m);
}

class ApplyWorker : public Napi::AsyncWorker {
 public:
  ApplyWorker(Napi::Env env, std::shared_ptr<Loaded> st, std::vector<Group> groups)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), st_(std::move(st)), groups_(std::move(groups)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    double t0 = NowMs();
    for (size_t g = 0; g < groups_.size() && !err_; g++) Run(g);
    ms_ = NowMs() - t0;
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (err_) {
      Napi::Error e = MakeErrnoError(env, err_, what_);
      e.Value().Set("group", (double)failedGroup_);
      e.Value().Set("element", (double)failedElement_);
      e.Value().Set("syscalls", (double)syscalls_);
      deferred_.Reject(e.Value());
      return;
    }
    Napi::Object o = Napi::Object::New(env);
    o.Set("syscalls", (double)syscalls_);
    o.Set("ms", ms_);
    deferred_.Resolve(o);
  }

 private:
  void Fail(size_t g, uint32_t el, int e, const std::string& what) {
    err_ = e; failedGroup_ = g; failedElement_ = el; what_ = what;
  }

  void Run(size_t g) {
    Group& gr = groups_[g];
    if (gr.count == 0) return;
    std::string what;
    int fd = MapFd(st_.get(), gr.map, &what);
    if (fd < 0) { Fail(g, 0, -fd, what); return; }
    bpf_map* m = bpf_object__find_map_by_name(st_->obj, gr.map.c_str());
    size_t ks = bpf_map__key_size(m), vs = bpf_map__value_size(m);
    if (gr.keysLen != ks * gr.count || (gr.update && gr.valuesLen != vs * gr.count)) {
      Fail(g, 0, EINVAL, gr.map + ": key/value buffers do not match the map's sizes (" + std::to_string(ks) + "/" + std::to_string(vs) + ")");
      return;
    }
    bpf_map_batch_opts o{};
    o.sz = sizeof(o);
    o.elem_flags = BPF_ANY;
    uint32_t n = gr.count;
    syscalls_++;
    int r = gr.update ? bpf_map_update_batch(fd, gr.keys, gr.values, &n, &o)
                      : bpf_map_delete_batch(fd, gr.keys, &n, &o);
    if (r == 0) return;
    // Batches stop at the first failing element (a delete of a missing key, or a kernel without batch
    // support): finish element by element from there, ignoring keys already gone.
    uint32_t start = (errno == EINVAL || errno == ENOTSUP || errno == EOPNOTSUPP) ? 0 : std::min(n, gr.count);
    for (uint32_t i = start; i < gr.count; i++) {
      syscalls_++;
      int rr = gr.update ? bpf_map_update_elem(fd, gr.keys + i * ks, gr.values + i * vs, BPF_ANY)
                         : bpf_map_delete_elem(fd, gr.keys + i * ks);
      if (rr != 0 && !(!gr.update && errno == ENOENT)) { Fail(g, i, errno, std::string(gr.update ? "update " : "delete ") + gr.map); return; }
    }
  }

  Napi::Promise::Deferred deferred_;
  std::shared_ptr<Loaded> st_;
  std::vector<Group> groups_;
  int err_ = 0;
  size_t failedGroup_ = 0;
  uint32_t failedElement_ = 0;
  std::string what_;
  uint64_t syscalls_ = 0;
  double ms_ = 0;
};

class DumpWorker : public Napi::AsyncWorker {
 public:
  DumpWorker(Napi::Env env, std::shared_ptr<Loaded> st, std::string map)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), st_(std::move(st)), map_(std::move(map)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    int fd = MapFd(st_.get(), map_, &what_);
    if (fd < 0) { err_ = -fd; return; }
    bpf_map* m = bpf_object__find_map_by_name(st_->obj, map_.c_str());
    ks_ = bpf_map__key_size(m);
    vs_ = bpf_map__value_size(m);
    // Batched lookups (one syscall per chunk), then the key-by-key walk where the map type has none.
    const uint32_t chunk = 8192;
    std::vector<uint8_t> kb(ks_ * chunk), vb(vs_ * chunk);
    uint64_t token = 0;
    bool first = true, batched = true;
    for (;;) {
      uint32_t n = chunk;
      bpf_map_batch_opts o{};
      o.sz = sizeof(o);
      syscalls_++;
      int r = bpf_map_lookup_batch(fd, first ? nullptr : &token, &token, kb.data(), vb.data(), &n, &o);
      int e = r ? errno : 0;
      if (r != 0 && e != ENOENT) {
        if (first && (e == EINVAL || e == ENOTSUP || e == EOPNOTSUPP)) { batched = false; break; }
        err_ = e; what_ = "lookup batch " + map_; return;
      }
      keys_.insert(keys_.end(), kb.begin(), kb.begin() + n * ks_);
      values_.insert(values_.end(), vb.begin(), vb.begin() + n * vs_);
      count_ += n;
      first = false;
      if (e == ENOENT) break;   // the last chunk
    }
    if (batched) return;
    std::vector<uint8_t> key(ks_), next(ks_), val(vs_);
    const void* prev = nullptr;
    for (;;) {
      syscalls_++;
      if (bpf_map_get_next_key(fd, prev, next.data()) != 0) {
        if (errno == ENOENT) break;
        err_ = errno; what_ = "iterate " + map_; return;
      }
      syscalls_++;
      if (bpf_map_lookup_elem(fd, next.data(), val.data()) == 0) {
        keys_.insert(keys_.end(), next.begin(), next.end());
        values_.insert(values_.end(), val.begin(), val.end());
        count_++;
      }
      key = next;
      prev = key.data();
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (err_) { deferred_.Reject(MakeErrnoError(env, err_, what_).Value()); return; }
    Napi::Object o = Napi::Object::New(env);
    o.Set("count", (double)count_);
    o.Set("keySize", (double)ks_);
    o.Set("valueSize", (double)vs_);
    o.Set("keys", Napi::Buffer<uint8_t>::Copy(env, keys_.data(), keys_.size()));
    o.Set("values", Napi::Buffer<uint8_t>::Copy(env, values_.data(), values_.size()));
    o.Set("syscalls", (double)syscalls_);
    deferred_.Resolve(o);
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::shared_ptr<Loaded> st_;
  std::string map_, what_;
  std::vector<uint8_t> keys_, values_;
  size_t ks_ = 0, vs_ = 0;
  uint64_t count_ = 0, syscalls_ = 0;
  int err_ = 0;
};

// One /proc/PID/ns/net path per network namespace of the processes under a cgroup (recursively): a
// socket iterator sees the sockets of the namespace it was created in, and pods have their own.
void CgroupNetns(const std::string& dir, std::map<ino_t, std::string>* out, int depth = 0) {
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

class DestroyWorker : public Napi::AsyncWorker {
 public:
  DestroyWorker(Napi::Env env, std::shared_ptr<Loaded> st, std::vector<uint8_t> keys, uint32_t count)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), st_(std::move(st)), keys_(std::move(keys)), count_(count) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    double t0 = NowMs();
    Sweep();
    ms_ = NowMs() - t0;
  }

  // (Not named Destroy: that is AsyncWorker's virtual that deletes the worker once it completed.)
  void Sweep() {
    int fd = MapFd(st_.get(), "kpng_gone", &what_);
    if (fd < 0) { err_ = -fd; return; }
    bpf_map* m = bpf_object__find_map_by_name(st_->obj, "kpng_gone");
    size_t ks = bpf_map__key_size(m);
    if (keys_.size() != ks * count_) { err_ = EINVAL; what_ = "kpng_gone: keys do not match the key size " + std::to_string(ks); return; }
    uint8_t one = 1;
    for (uint32_t i = 0; i < count_; i++) {
      syscalls_++;
      if (bpf_map_update_elem(fd, &keys_[i * ks], &one, BPF_ANY) != 0) { err_ = errno; what_ = "update kpng_gone"; break; }
    }
    if (!err_) {
      // An iterator sees the sockets of the namespace it is created in: the host's, and each pod's
      // (the namespaces of the processes under the cgroup) unless only the host's are balanced.
      std::map<ino_t, std::string> spaces;
      struct stat self;
      if (st_->hostNetns.empty() && stat("/proc/thread-self/ns/net", &self) == 0) spaces[self.st_ino] = "";
      else if (stat(st_->hostNetns.c_str(), &self) == 0) spaces[self.st_ino] = st_->hostNetns;
      if (!st_->hostOnly) CgroupNetns(st_->cgroup, &spaces);
      // Each iterator walks its protocol's whole socket table once per namespace: only those asked for.
      bool want[2] = {false, false};
      for (uint32_t i = 0; i < count_; i++) {
        uint8_t proto = keys_[i * ks + offsetof(GoneKey, proto)];
        want[0] |= proto == IPPROTO_TCP;
        want[1] |= proto == IPPROTO_UDP;
      }
      for (int p = 0; p < 2 && !err_; p++) if (want[p]) Run(kIterPrograms[p], p == 0 ? &tcp_ : &udp_, spaces);
    }
    // Always empty kpng_gone again (a later run must not destroy sockets to a backend that came back).
    for (uint32_t i = 0; i < count_; i++) { syscalls_++; bpf_map_delete_elem(fd, &keys_[i * ks]); }
  }

  void Run(const char* name, uint64_t* destroyed, const std::map<ino_t, std::string>& spaces) {
    bpf_program* prog = bpf_object__find_program_by_name(st_->obj, name);
    if (!prog || bpf_program__fd(prog) < 0) { err_ = ENOENT; what_ = std::string("the program ") + name + " is not loaded"; return; }
    bpf_link* link = bpf_program__attach_iter(prog, nullptr);
    syscalls_++;
    if (!link) { err_ = errno; what_ = std::string("attach the socket iterator ") + name; return; }
    namespaces_ = 0;
    for (const auto& sp : spaces) {
      NetnsGuard g(sp.second);
      if (g.error()) continue;   // the process is gone
      UniqueFd it(bpf_iter_create(bpf_link__fd(link)));
      syscalls_++;
      if (it < 0) { err_ = errno; what_ = std::string("create the socket iterator ") + name; break; }
      namespaces_++;
      char buf[4096];
      for (;;) {
        ssize_t n = read(it, buf, sizeof(buf));
        syscalls_++;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { err_ = errno; what_ = std::string("run the socket iterator ") + name; break; }
        if (n == 0) break;
        *destroyed += n;   // one byte per socket destroyed
      }
      if (err_) break;
    }
    bpf_link__destroy(link);
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (err_) { deferred_.Reject(MakeErrnoError(env, err_, what_).Value()); return; }
    Napi::Object o = Napi::Object::New(env);
    o.Set("tcp", (double)tcp_);
    o.Set("udp", (double)udp_);
    o.Set("namespaces", (double)namespaces_);
    o.Set("syscalls", (double)syscalls_);
    o.Set("ms", ms_);
    deferred_.Resolve(o);
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::shared_ptr<Loaded> st_;
  std::vector<uint8_t> keys_;
  uint32_t count_;
  std::string what_;
  int err_ = 0;
  uint64_t tcp_ = 0, udp_ = 0, syscalls_ = 0, namespaces_ = 0;
  double ms_ = 0;
};

class CloseWorker : public Napi::AsyncWorker {
 public:
  CloseWorker(Napi::Env env, int handle) : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), handle_(handle) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    std::shared_ptr<Loaded> st;
    {
      std::lock_guard<std::mutex> lk(g_mu);
      auto it = g_handles.find(handle_);
      if (it != g_handles.end()) { st = it->second; g_handles.erase(it); }
    }
    // Descriptors close here (the last reference), off the JS thread.
  }
  void OnOK() override { deferred_.Resolve(Env().Undefined()); }
 private:
  Napi::Promise::Deferred deferred_;
  int handle_;
};

class CleanupWorker : public Napi::AsyncWorker {
 public:
  CleanupWorker(Napi::Env env, std::string pinDir) : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), pinDir_(std::move(pinDir)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    // A running kpng holds the directory's lock: detaching its links under it would turn its socket LB
    // off behind its back (it would only notice at its next look).
    UniqueFd lock(open(pinDir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) != 0) {
      err_ = errno == EWOULDBLOCK ? EBUSY : errno;
      struct stat ds;
      long pid = fstat(lock, &ds) == 0 ? FlockHolder(ds) : 0;
      what_ = "clean-up of " + pinDir_ + ": a running kpng holds it" + (pid ? " (pid " + std::to_string(pid) + ")" : "") + "; stop it first";
      return;
    }
    DIR* d = opendir(pinDir_.c_str());
    if (!d) { if (errno != ENOENT) { err_ = errno; what_ = "open " + pinDir_; } return; }
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
    for (const std::string& n : names) {
      std::string p = pinDir_ + "/" + n;
      if (n.rfind("link_", 0) == 0) {
        // Detach now: other descriptors of the link (a running kpng) would otherwise keep it attached.
        UniqueFd fd(bpf_obj_get(p.c_str()));
        if (fd >= 0) bpf_link_detach(fd);
      }
      if (unlink(p.c_str()) != 0) { err_ = errno; what_ = "unlink " + p; return; }
      removed_.push_back(n);
    }
    if (rmdir(pinDir_.c_str()) != 0 && errno != ENOENT) { err_ = errno; what_ = "rmdir " + pinDir_; }
  }
  void OnOK() override {
    Napi::Env env = Env();
    if (err_) { deferred_.Reject(MakeErrnoError(env, err_, what_).Value()); return; }
    Napi::Array a = Napi::Array::New(env, removed_.size());
    for (size_t i = 0; i < removed_.size(); i++) a[i] = Napi::String::New(env, removed_[i]);
    deferred_.Resolve(a);
  }
 private:
  Napi::Promise::Deferred deferred_;
  std::string pinDir_, what_;
  std::vector<std::string> removed_;
  int err_ = 0;
};

bool StringProp(Napi::Env env, Napi::Object o, const char* name, bool required, std::string* out) {
  Napi::Value v = o.Get(name);
  if (v.IsUndefined() || v.IsNull()) {
    if (!required) return true;
  } else if (v.IsString()) {
    *out = v.As<Napi::String>().Utf8Value();
    if (!out->empty() && (*out)[0] == '/') return true;
  }
  Napi::TypeError::New(env, std::string(name) + ": an absolute path string").ThrowAsJavaScriptException();
  return false;
}

int HandleArg(const Napi::CallbackInfo& info, std::shared_ptr<Loaded>* st) {
  if (info.Length() < 1 || !info[0].IsNumber()) {
    Napi::TypeError::New(info.Env(), "handle: the number returned by ebpfOpen").ThrowAsJavaScriptException();
    return -1;
  }
  int h = info[0].As<Napi::Number>().Int32Value();
  if (st) {
    *st = Find(h);
    if (!*st) { Napi::Error::New(info.Env(), "ebpf handle " + std::to_string(h) + " is closed").ThrowAsJavaScriptException(); return -1; }
  }
  return h;
}

}  // namespace

Napi::Value EbpfOpen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  static std::once_flag once;
  std::call_once(once, [] { libbpf_set_print(LibbpfPrint); });
  if (info.Length() < 1 || !info[0].IsObject()) {
    Napi::TypeError::New(env, "ebpfOpen({cgroup, pinDir, object?, mapEntries?, prealloc?, hostNetnsOnly?, netns?, socketDestroy?})").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Object o = info[0].As<Napi::Object>();
  std::string cgroup, pinDir, object;
  if (!StringProp(env, o, "cgroup", true, &cgroup) || !StringProp(env, o, "pinDir", true, &pinDir) ||
      !StringProp(env, o, "object", false, &object)) return env.Undefined();
  while (pinDir.size() > 1 && pinDir.back() == '/') pinDir.pop_back();
  std::string netns;
  if (!StringProp(env, o, "netns", false, &netns)) return env.Undefined();
  bool hostNetnsOnly = o.Get("hostNetnsOnly").ToBoolean();
  Napi::Value sd = o.Get("socketDestroy");
  bool socketDestroy = sd.IsUndefined() || sd.ToBoolean();
  uint32_t entries = 0;
  Napi::Value me = o.Get("mapEntries");
  if (!me.IsUndefined() && !me.IsNull()) {
    if (!me.IsNumber() || me.As<Napi::Number>().DoubleValue() < 1 || me.As<Napi::Number>().DoubleValue() > (1 << 26)) {
      Napi::TypeError::New(env, "mapEntries: a number of entries, 1 .. 67108864").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    entries = me.As<Napi::Number>().Uint32Value();
  }
  bool prealloc = o.Get("prealloc").ToBoolean();
  auto* w = new OpenWorker(env, cgroup, pinDir, object, entries, prealloc, hostNetnsOnly, netns, socketDestroy);
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

Napi::Value EbpfMapApply(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Loaded> st;
  if (HandleArg(info, &st) < 0) return env.Undefined();
  if (info.Length() < 2 || !info[1].IsArray()) {
    Napi::TypeError::New(env, "ebpfMapApply(handle, [{map, op, count, keys, values?}])").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Array a = info[1].As<Napi::Array>();
  std::vector<Group> groups;
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value v = a[i];
    auto bad = [&](const std::string& m) { Napi::TypeError::New(env, "ebpfMapApply group " + std::to_string(i) + ": " + m).ThrowAsJavaScriptException(); };
    if (!v.IsObject()) { bad("not an object"); return env.Undefined(); }
    Napi::Object g = v.As<Napi::Object>();
    Group gr;
    Napi::Value map = g.Get("map"), op = g.Get("op"), count = g.Get("count"), keys = g.Get("keys"), values = g.Get("values");
    if (!map.IsString()) { bad("map: a map name"); return env.Undefined(); }
    gr.map = map.As<Napi::String>().Utf8Value();
    std::string ops = op.IsString() ? op.As<Napi::String>().Utf8Value() : "";
    if (ops != "update" && ops != "delete") { bad("op: 'update' or 'delete'"); return env.Undefined(); }
    gr.update = ops == "update";
    if (!count.IsNumber()) { bad("count: a number"); return env.Undefined(); }
    gr.count = count.As<Napi::Number>().Uint32Value();
    if (!keys.IsBuffer()) { bad("keys: a Buffer"); return env.Undefined(); }
    auto kb = keys.As<Napi::Buffer<uint8_t>>();
    gr.keys = kb.Data();
    gr.keysLen = kb.Length();
    gr.keysRef = Napi::Persistent(kb);
    if (gr.update) {
      if (!values.IsBuffer()) { bad("values: a Buffer (update)"); return env.Undefined(); }
      auto vb = values.As<Napi::Buffer<uint8_t>>();
      gr.values = vb.Data();
      gr.valuesLen = vb.Length();
      gr.valuesRef = Napi::Persistent(vb);
    }
    groups.push_back(std::move(gr));
  }
  auto* w = new ApplyWorker(env, st, std::move(groups));
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

Napi::Value EbpfMapDump(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Loaded> st;
  if (HandleArg(info, &st) < 0) return env.Undefined();
  if (info.Length() < 2 || !info[1].IsString()) {
    Napi::TypeError::New(env, "ebpfMapDump(handle, mapName)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto* w = new DumpWorker(env, st, info[1].As<Napi::String>().Utf8Value());
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

Napi::Value EbpfDestroySockets(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Loaded> st;
  if (HandleArg(info, &st) < 0) return env.Undefined();
  if (info.Length() < 3 || !info[1].IsBuffer() || !info[2].IsNumber()) {
    Napi::TypeError::New(env, "ebpfDestroySockets(handle, keys: Buffer, count: number)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto kb = info[1].As<Napi::Buffer<uint8_t>>();
  auto* w = new DestroyWorker(env, st, std::vector<uint8_t>(kb.Data(), kb.Data() + kb.Length()), info[2].As<Napi::Number>().Uint32Value());
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

Napi::Value EbpfSevered(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Loaded> st;
  if (HandleArg(info, &st) < 0) return env.Undefined();
  // One syscall per link, on the calling thread: cheap enough to ask at every sync and on a timer.
  Napi::Array out = Napi::Array::New(env);
  uint32_t n = 0;
  for (size_t i = 0; i < st->links.size(); i++) {
    bpf_link_info li{};
    uint32_t len = sizeof(li);
    if (bpf_obj_get_info_by_fd(bpf_link__fd(st->links[i]), &li, &len) != 0 || li.type != BPF_LINK_TYPE_CGROUP || li.cgroup.cgroup_id != 0) continue;
    out[n++] = Napi::String::New(env, st->linkNames[i]);
  }
  return out;
}

Napi::Value EbpfActivate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Loaded> st;
  if (HandleArg(info, &st) < 0) return env.Undefined();
  // One syscall per link, on the calling thread, once per open that replaced maps.
  uint32_t done = 0;
  while (!st->pending.empty()) {
    auto [l, p] = st->pending.back();
    if (bpf_link__update_program(l, p) != 0) {
      MakeErrnoError(env, errno, std::string("update the pinned link of ") + bpf_program__name(p)).ThrowAsJavaScriptException();
      return env.Undefined();
    }
    st->pending.pop_back();
    done++;
  }
  return Napi::Number::New(env, done);
}

Napi::Value EbpfClose(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int h = HandleArg(info, nullptr);
  if (h < 0) return env.Undefined();
  auto* w = new CloseWorker(env, h);
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

Napi::Value EbpfCleanup(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) {
    Napi::TypeError::New(env, "ebpfCleanup({pinDir})").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::string pinDir;
  if (!StringProp(env, info[0].As<Napi::Object>(), "pinDir", true, &pinDir)) return env.Undefined();
  auto* w = new CleanupWorker(env, pinDir);
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

}  // namespace kpng
