// ebpfOpen: native/bpf/sock_lb.bpf.c's object opened, configured (the host namespace's cookie, the map
// sizes, the socket iterators left out where the kernel cannot run them), loaded over the maps pinned
// by a previous start, and its cgroup programs attached through pinned links, reused where they can be
// (pins.cc decides which).
#include "ebpf.h"

#include <bpf/btf.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/socket.h>

#include <mutex>

namespace kpng {
namespace ebpf {

namespace {

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

class OpenWorker : public PromiseWorker {
 public:
  OpenWorker(Napi::Env env, std::string cgroup, std::string pinDir, std::string object, uint32_t mapEntries,
             bool prealloc, bool hostNetnsOnly, std::string netns, bool socketDestroy)
      : PromiseWorker(env), cgroup_(std::move(cgroup)), pinDir_(std::move(pinDir)), object_(std::move(object)),
        mapEntries_(mapEntries), prealloc_(prealloc), hostNetnsOnly_(hostNetnsOnly), netns_(std::move(netns)),
        socketDestroy_(socketDestroy) {}

 private:
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
    long pid = 0;
    if ((err_ = LockPinDir(st->lockFd, &pid))) {
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
    if (!PinMaps(st.get(), &names, &replacedMaps)) return;
    // Reuses the pinned maps, pins the new ones.
    if (bpf_object__load(st->obj) != 0) { err_ = errno ? errno : EINVAL; what_ = "load " + object_; return; }
    if (!AttachPrograms(st.get(), &names, replacedMaps)) return;
    RemoveStrangers(pinDir_, names, &found_);
    st->cgroup = cgroup_;
    st->hostOnly = hostNetnsOnly_;
    st->hostNetns = netns_;
    pendingLinks_ = st->pending.size();
    handle_ = AddHandle(st);
  }

  // Sizes the maps and points each at its pin: a pinned map of the same layout is reused by the load,
  // another one is unpinned (*replacedMaps counts those). False with err_ set on failure.
  bool PinMaps(Loaded* st, std::set<std::string>* names, int* replacedMaps) {
    bpf_map* m;
    bpf_object__for_each_map(m, st->obj) {
      if (bpf_map__is_internal(m)) continue;   // .rodata: set above for this load, not shared
      std::string name = bpf_map__name(m);
      std::string pin = pinDir_ + "/" + name;
      names->insert(name);
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
          (*replacedMaps)++;
          if (unlink(pin.c_str()) != 0) { err_ = errno; what_ = "unlink " + pin; return false; }
          found_.push_back("map " + name + " " + why + ": replaced by an empty map (filled by the next full sync)");
        }
      }
      bpf_map__set_pin_path(m, pin.c_str());
    }
    return true;
  }

  // Attaches the loaded object's cgroup programs: through their pinned links where those can be
  // taken over (pointed at the new programs at once, or by ebpfActivate once replaced maps are
  // filled), else through new links pinned in their place. False with err_ set on failure.
  bool AttachPrograms(Loaded* st, std::set<std::string>* names, int replacedMaps) {
    UniqueFd cg(open(cgroup_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (cg < 0) { err_ = errno; what_ = "open cgroup " + cgroup_; return false; }
    uint64_t cgid = CgroupId(cgroup_);
    int otherBuild = 0;
    std::map<std::string, std::vector<std::string>> linkWhy;   // why a pinned link was replaced: its pins
    bpf_program* p;
    bpf_object__for_each_program(p, st->obj) {
      // Only the cgroup programs are attached here; the socket iterator runs on demand (DestroyWorker).
      if (std::string(bpf_program__section_name(p)).rfind("cgroup/", 0) != 0) continue;
      std::string name = bpf_program__name(p);
      std::string pin = pinDir_ + "/link_" + name;
      names->insert("link_" + name);
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
        if (!l) { err_ = errno; what_ = "attach " + name + " to " + cgroup_; return false; }
        if ((err_ = PinLink(l, pinDir_, name, &what_))) { bpf_link__destroy(l); return false; }
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
    return true;
  }

  // What libbpf said while the open failed.
  void AddErrorFields(Napi::Object error) override {
    if (!log_.empty()) error.Set("libbpf", log_);
  }

  Napi::Value Result(Napi::Env env) override {
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
    return o;
  }

  std::string cgroup_, pinDir_, object_, log_;
  std::vector<std::string> programs_, found_;
  int handle_ = 0, reusedMaps_ = 0, reusedLinks_ = 0, pendingLinks_ = 0;
  uint32_t mapEntries_;
  bool prealloc_;
  bool hostNetnsOnly_;
  std::string netns_;
  bool socketDestroy_;
  uint64_t hostNetns_ = 0;
  std::string socketDestroyOff_;
};

}  // namespace
}  // namespace ebpf

using namespace ebpf;

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
  return (new OpenWorker(env, cgroup, pinDir, object, entries, prealloc, hostNetnsOnly, netns, socketDestroy))->Start();
}

}  // namespace kpng
