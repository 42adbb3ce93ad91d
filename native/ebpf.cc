// eBPF socket load balancing through libbpf: load native/bpf/sock_lb.bpf.c's object, attach its cgroup
// programs, pin maps and links under a bpffs directory (reused on the next start, so a restart keeps
// connections balanced), batched map updates / deletes, map dumps, and clean-up. Every kernel call runs
// in an AsyncWorker; a loaded object lives in a handle owned by this file.
//   ebpfOpen({cgroup, pinDir, object?, mapEntries?}) -> {handle, object, reusedMaps, reusedLinks, programs}
//       mapEntries: max entries of kpng_svc and kpng_be (0: the object's own)
//   ebpfMapApply(handle, [{map, op: 'update'|'delete', count, keys: Buffer, values?: Buffer}])
//       -> {syscalls, ms}; on failure rejects with {group, element, errno, code, syscalls}
//   ebpfMapDump(handle, map) -> {count, keys: Buffer, values: Buffer, syscalls}
//   ebpfDestroyUdp(handle, gone: Buffer, count) -> {destroyed, syscalls}: destroys the UDP sockets the
//       programs connected to these removed backends (kpng_gone keys), through the iter/udp program
//   ebpfClose(handle)                 closes descriptors; pinned links keep the programs attached
//   ebpfCleanup({pinDir})             detaches pinned links, removes every pin and the directory
#include "common.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <dlfcn.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace kpng {

namespace {

struct Loaded {
  bpf_object* obj = nullptr;
  std::string cgroup;
  std::vector<bpf_link*> links;
  ~Loaded() {
    for (bpf_link* l : links) bpf_link__destroy(l);  // pinned links stay attached
    if (obj) bpf_object__close(obj);
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

class OpenWorker : public Napi::AsyncWorker {
 public:
  OpenWorker(Napi::Env env, std::string cgroup, std::string pinDir, std::string object, uint32_t mapEntries)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), cgroup_(std::move(cgroup)),
        pinDir_(std::move(pinDir)), object_(std::move(object)), mapEntries_(mapEntries) {}
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
    st->obj = bpf_object__open_file(object_.c_str(), nullptr);
    if (!st->obj) { st->obj = nullptr; err_ = errno ? errno : ENOENT; what_ = "open " + object_; return; }
    bpf_map* m;
    bpf_object__for_each_map(m, st->obj) {
      std::string pin = pinDir_ + "/" + bpf_map__name(m);
      if (Exists(pin)) reusedMaps_++;
      bpf_map__set_pin_path(m, pin.c_str());
      std::string name = bpf_map__name(m);
      if (mapEntries_ && (name == "kpng_svc" || name == "kpng_be")) bpf_map__set_max_entries(m, mapEntries_);
    }
    // Reuses compatible pinned maps, pins the new ones.
    if (bpf_object__load(st->obj) != 0) { err_ = errno ? errno : EINVAL; what_ = "load " + object_ + " (pinned maps of another layout or size? run the clean-up)"; return; }
    UniqueFd cg(open(cgroup_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (cg < 0) { err_ = errno; what_ = "open cgroup " + cgroup_; return; }
    bpf_program* p;
    bpf_object__for_each_program(p, st->obj) {
      // Only the cgroup programs are attached here; the socket iterator runs on demand (DestroyWorker).
      if (std::string(bpf_program__section_name(p)).rfind("cgroup/", 0) != 0) continue;
      std::string name = bpf_program__name(p);
      std::string pin = pinDir_ + "/link_" + name;
      programs_.push_back(name);
      bpf_link* l = nullptr;
      if (Exists(pin)) {
        // The pinned link kept the program attached across the restart: point it at this program
        // (same maps), without a moment unattached.
        l = bpf_link__open(pin.c_str());
        if (l && bpf_link__update_program(l, p) != 0) { err_ = errno; what_ = "update pinned link " + pin; bpf_link__destroy(l); return; }
        if (l) reusedLinks_++;
      }
      if (!l) {
        if (Exists(pin)) unlink(pin.c_str());
        l = bpf_program__attach_cgroup(p, cg);
        if (!l) { err_ = errno; what_ = "attach " + name + " to " + cgroup_; return; }
        if (bpf_link__pin(l, pin.c_str()) != 0) { err_ = errno; what_ = "pin " + pin; bpf_link__destroy(l); return; }
      }
      st->links.push_back(l);
    }
    st->cgroup = cgroup_;
    std::lock_guard<std::mutex> lk(g_mu);
    handle_ = g_next++;
    g_handles[handle_] = st;
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
    Napi::Array progs = Napi::Array::New(env, programs_.size());
    for (size_t i = 0; i < programs_.size(); i++) progs[i] = Napi::String::New(env, programs_[i]);
    o.Set("programs", progs);
    deferred_.Resolve(o);
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::string cgroup_, pinDir_, object_, what_, log_;
  std::vector<std::string> programs_;
  int err_ = 0, handle_ = 0, reusedMaps_ = 0, reusedLinks_ = 0;
  uint32_t mapEntries_;
};

struct Group {
  std::string map;
  bool update = true;
  uint32_t count = 0;
  std::vector<uint8_t> keys, values;
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
    if (gr.keys.size() != ks * gr.count || (gr.update && gr.values.size() != vs * gr.count)) {
      Fail(g, 0, EINVAL, gr.map + ": key/value buffers do not match the map's sizes (" + std::to_string(ks) + "/" + std::to_string(vs) + ")");
      return;
    }
    bpf_map_batch_opts o{};
    o.sz = sizeof(o);
    o.elem_flags = BPF_ANY;
    uint32_t n = gr.count;
    syscalls_++;
    int r = gr.update ? bpf_map_update_batch(fd, gr.keys.data(), gr.values.data(), &n, &o)
                      : bpf_map_delete_batch(fd, gr.keys.data(), &n, &o);
    if (r == 0) return;
    // Batches stop at the first failing element (a delete of a missing key, or a kernel without batch
    // support): finish element by element from there, ignoring keys already gone.
    uint32_t start = (errno == EINVAL || errno == ENOTSUP || errno == EOPNOTSUPP) ? 0 : std::min(n, gr.count);
    for (uint32_t i = start; i < gr.count; i++) {
      syscalls_++;
      int rr = gr.update ? bpf_map_update_elem(fd, &gr.keys[i * ks], &gr.values[i * vs], BPF_ANY)
                         : bpf_map_delete_elem(fd, &gr.keys[i * ks]);
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
    int fd = MapFd(st_.get(), "kpng_gone", &what_);
    if (fd < 0) { err_ = -fd; return; }
    bpf_map* m = bpf_object__find_map_by_name(st_->obj, "kpng_gone");
    size_t ks = bpf_map__key_size(m);
    if (keys_.size() != ks * count_) { err_ = EINVAL; what_ = "kpng_gone: keys do not match the key size " + std::to_string(ks); return; }
    bpf_program* prog = bpf_object__find_program_by_name(st_->obj, "kpng_destroy_udp");
    if (!prog) { err_ = ENOENT; what_ = "no program kpng_destroy_udp"; return; }
    uint8_t one = 1;
    for (uint32_t i = 0; i < count_; i++) {
      syscalls_++;
      if (bpf_map_update_elem(fd, &keys_[i * ks], &one, BPF_ANY) != 0) { err_ = errno; what_ = "update kpng_gone"; break; }
    }
    if (!err_) {
      bpf_link* link = bpf_program__attach_iter(prog, nullptr);
      syscalls_++;
      if (!link) { err_ = errno; what_ = "attach the udp socket iterator"; }
      else {
        std::map<ino_t, std::string> spaces;
        struct stat self;
        if (stat("/proc/thread-self/ns/net", &self) == 0) spaces[self.st_ino] = "";
        CgroupNetns(st_->cgroup, &spaces);
        for (const auto& sp : spaces) {
          NetnsGuard g(sp.second);
          if (g.error()) continue;   // the process is gone
          UniqueFd it(bpf_iter_create(bpf_link__fd(link)));
          syscalls_++;
          if (it < 0) { err_ = errno; what_ = "create the udp socket iterator"; break; }
          namespaces_++;
          char buf[4096];
          for (;;) {
            ssize_t n = read(it, buf, sizeof(buf));
            syscalls_++;
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) { err_ = errno; what_ = "run the udp socket iterator"; break; }
            if (n == 0) break;
            destroyed_ += n;
          }
          if (err_) break;
        }
        bpf_link__destroy(link);
      }
    }
    // Always empty kpng_gone again (a later run must not destroy sockets to a backend that came back).
    for (uint32_t i = 0; i < count_; i++) { syscalls_++; bpf_map_delete_elem(fd, &keys_[i * ks]); }
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (err_) { deferred_.Reject(MakeErrnoError(env, err_, what_).Value()); return; }
    Napi::Object o = Napi::Object::New(env);
    o.Set("destroyed", (double)destroyed_);
    o.Set("namespaces", (double)namespaces_);
    o.Set("syscalls", (double)syscalls_);
    deferred_.Resolve(o);
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::shared_ptr<Loaded> st_;
  std::vector<uint8_t> keys_;
  uint32_t count_;
  std::string what_;
  int err_ = 0;
  uint64_t destroyed_ = 0, syscalls_ = 0, namespaces_ = 0;
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
    Napi::TypeError::New(env, "ebpfOpen({cgroup, pinDir, object?})").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Object o = info[0].As<Napi::Object>();
  std::string cgroup, pinDir, object;
  if (!StringProp(env, o, "cgroup", true, &cgroup) || !StringProp(env, o, "pinDir", true, &pinDir) ||
      !StringProp(env, o, "object", false, &object)) return env.Undefined();
  while (pinDir.size() > 1 && pinDir.back() == '/') pinDir.pop_back();
  uint32_t entries = 0;
  Napi::Value me = o.Get("mapEntries");
  if (!me.IsUndefined() && !me.IsNull()) {
    if (!me.IsNumber() || me.As<Napi::Number>().DoubleValue() < 1 || me.As<Napi::Number>().DoubleValue() > (1 << 26)) {
      Napi::TypeError::New(env, "mapEntries: a number of entries, 1 .. 67108864").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    entries = me.As<Napi::Number>().Uint32Value();
  }
  auto* w = new OpenWorker(env, cgroup, pinDir, object, entries);
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
    gr.keys.assign(kb.Data(), kb.Data() + kb.Length());
    if (gr.update) {
      if (!values.IsBuffer()) { bad("values: a Buffer (update)"); return env.Undefined(); }
      auto vb = values.As<Napi::Buffer<uint8_t>>();
      gr.values.assign(vb.Data(), vb.Data() + vb.Length());
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

Napi::Value EbpfDestroyUdp(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Loaded> st;
  if (HandleArg(info, &st) < 0) return env.Undefined();
  if (info.Length() < 3 || !info[1].IsBuffer() || !info[2].IsNumber()) {
    Napi::TypeError::New(env, "ebpfDestroyUdp(handle, keys: Buffer, count: number)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto kb = info[1].As<Napi::Buffer<uint8_t>>();
  auto* w = new DestroyWorker(env, st, std::vector<uint8_t>(kb.Data(), kb.Data() + kb.Length()), info[2].As<Napi::Number>().Uint32Value());
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
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
