// What the files of native/ebpf/ share: the loaded object behind a handle, the handle registry and
// argument checks (handles.cc), pin checks (pins.cc), the cgroup walk (cgroups.cc), map descriptors
// (maps.cc) and the socket iterators' names (sockets.cc). The addon's eBPF calls:
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
// They live in loader.cc (ebpfOpen), maps.cc (ebpfMapApply, ebpfMapDump), sockets.cc
// (ebpfDestroySockets), links.cc (ebpfSevered, ebpfActivate), handles.cc (ebpfClose) and cleanup.cc
// (ebpfCleanup). Every kernel call but the two synchronous ones runs in a PromiseWorker.
#pragma once
#include "../promise_worker.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kpng {
namespace ebpf {

// A loaded object and what an open attached and locked for it; the descriptors close with the last
// reference (ebpfClose, or the last call in flight).
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

// handles.cc: the numbers ebpfOpen returns.
int AddHandle(std::shared_ptr<Loaded> st);
std::shared_ptr<Loaded> TakeHandle(int h);   // removed from the registry
// The handle at info[0], and its object when st is given; -1 with a JS exception pending when it is
// no handle or (st given) a closed one.
int HandleArg(const Napi::CallbackInfo& info, std::shared_ptr<Loaded>* st);
// An absolute path property; false with a JS exception pending otherwise.
bool StringProp(Napi::Env env, Napi::Object o, const char* name, bool required, std::string* out);

// pins.cc: the pin directory, its lock, and whether what a pin holds can be taken over.
int EnsurePinDir(const std::string& pinDir, std::string* msg);
int LockPinDir(int fd, long* holder);
bool Exists(const std::string& p);
std::string FdKind(int fd);
std::string MapMismatch(const std::string& pin, bpf_map* m);
std::string LinkMismatch(const std::string& pin, uint64_t cgroupId, bpf_attach_type want, UniqueFd* old, uint32_t* progId);
bool SameProgram(uint32_t id, int fd);
int PinLink(bpf_link* l, const std::string& pinDir, const std::string& name, std::string* what);
void RemoveStrangers(const std::string& pinDir, const std::set<std::string>& names, std::vector<std::string>* found);

// cgroups.cc
uint64_t CgroupId(const std::string& path);
void CgroupNetns(const std::string& dir, std::map<ino_t, std::string>* out, int depth = 0);

// maps.cc: a map's descriptor, or -errno with what is missing.
int MapFd(Loaded* st, const std::string& name, std::string* what);

// sockets.cc: the socket iterators, run by ebpfDestroySockets, left out of the load when the kernel
// cannot destroy sockets.
extern const char* const kIterPrograms[2];

}  // namespace ebpf
}  // namespace kpng
