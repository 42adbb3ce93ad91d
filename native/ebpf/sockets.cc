// Sockets of removed backends, destroyed: the programs rewrote their destination at connect(), so
// they would stay connected to a backend that is gone. The backends' keys go into kpng_gone, and the
// iter/tcp and iter/udp programs destroy every socket whose peer is one of them, once per network
// namespace such sockets may live in.
#include "ebpf.h"

#include <netinet/in.h>
#include <sys/stat.h>

namespace kpng {
namespace ebpf {

const char* const kIterPrograms[2] = {"kpng_destroy_tcp", "kpng_destroy_udp"};

namespace {

// kpng_gone's key (struct gone_key in sock_lb.bpf.c): the protocol tells which iterator to run.
struct GoneKey {
  uint8_t addr[16]; uint16_t port; uint8_t family, pad; uint8_t vip[16]; uint16_t vport; uint8_t proto, pad2;
};
static_assert(sizeof(GoneKey) == 40, "kpng_gone key layout");

class DestroyWorker : public PromiseWorker {
 public:
  DestroyWorker(Napi::Env env, std::shared_ptr<Loaded> st, std::vector<uint8_t> keys, uint32_t count)
      : PromiseWorker(env), st_(std::move(st)), keys_(std::move(keys)), count_(count) {}

 private:
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

  Napi::Value Result(Napi::Env env) override {
    Napi::Object o = Napi::Object::New(env);
    o.Set("tcp", (double)tcp_);
    o.Set("udp", (double)udp_);
    o.Set("namespaces", (double)namespaces_);
    o.Set("syscalls", (double)syscalls_);
    o.Set("ms", ms_);
    return o;
  }

  std::shared_ptr<Loaded> st_;
  std::vector<uint8_t> keys_;
  uint32_t count_;
  uint64_t tcp_ = 0, udp_ = 0, syscalls_ = 0, namespaces_ = 0;
  double ms_ = 0;
};

}  // namespace
}  // namespace ebpf

using namespace ebpf;

Napi::Value EbpfDestroySockets(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Loaded> st;
  if (HandleArg(info, &st) < 0) return env.Undefined();
  if (info.Length() < 3 || !info[1].IsBuffer() || !info[2].IsNumber()) {
    Napi::TypeError::New(env, "ebpfDestroySockets(handle, keys: Buffer, count: number)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto kb = info[1].As<Napi::Buffer<uint8_t>>();
  return (new DestroyWorker(env, st, std::vector<uint8_t>(kb.Data(), kb.Data() + kb.Length()), info[2].As<Napi::Number>().Uint32Value()))->Start();
}

}  // namespace kpng
