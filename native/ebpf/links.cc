// The cgroup links of an open object, afterwards, on the calling thread (one syscall per link): which
// ones the kernel severed (their cgroup was removed, nothing runs the programs), and the pinned links
// an open left on the previous programs until this object's new maps were filled, pointed at its own.
#include "ebpf.h"

namespace kpng {

using namespace ebpf;

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

}  // namespace kpng
