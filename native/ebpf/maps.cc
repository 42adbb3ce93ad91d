// The BPF maps' contents: batched updates and deletes (a full sync's tens of MB read in place from
// the caller's Buffers), and dumps. Batches fall back to one element at a time where the kernel or the
// map type has no batch operations, or past the element a batch stopped at.
#include "ebpf.h"

#include <algorithm>

namespace kpng {
namespace ebpf {

namespace {

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

class ApplyWorker : public PromiseWorker {
 public:
  ApplyWorker(Napi::Env env, std::shared_ptr<Loaded> st, std::vector<Group> groups)
      : PromiseWorker(env), st_(std::move(st)), groups_(std::move(groups)) {}

 private:
  void Execute() override {
    double t0 = NowMs();
    for (size_t g = 0; g < groups_.size() && !err_; g++) Run(g);
    ms_ = NowMs() - t0;
  }

  // Where the batches stopped: the group and its element, and the syscalls made until then.
  void AddErrorFields(Napi::Object error) override {
    error.Set("group", (double)failedGroup_);
    error.Set("element", (double)failedElement_);
    error.Set("syscalls", (double)syscalls_);
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Object o = Napi::Object::New(env);
    o.Set("syscalls", (double)syscalls_);
    o.Set("ms", ms_);
    return o;
  }

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

  std::shared_ptr<Loaded> st_;
  std::vector<Group> groups_;
  size_t failedGroup_ = 0;
  uint32_t failedElement_ = 0;
  uint64_t syscalls_ = 0;
  double ms_ = 0;
};

class DumpWorker : public PromiseWorker {
 public:
  DumpWorker(Napi::Env env, std::shared_ptr<Loaded> st, std::string map)
      : PromiseWorker(env), st_(std::move(st)), map_(std::move(map)) {}

 private:
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

  Napi::Value Result(Napi::Env env) override {
    Napi::Object o = Napi::Object::New(env);
    o.Set("count", (double)count_);
    o.Set("keySize", (double)ks_);
    o.Set("valueSize", (double)vs_);
    o.Set("keys", Napi::Buffer<uint8_t>::Copy(env, keys_.data(), keys_.size()));
    o.Set("values", Napi::Buffer<uint8_t>::Copy(env, values_.data(), values_.size()));
    o.Set("syscalls", (double)syscalls_);
    return o;
  }

  std::shared_ptr<Loaded> st_;
  std::string map_;
  std::vector<uint8_t> keys_, values_;
  size_t ks_ = 0, vs_ = 0;
  uint64_t count_ = 0, syscalls_ = 0;
};

}  // namespace

int MapFd(Loaded* st, const std::string& name, std::string* what) {
  bpf_map* m = bpf_object__find_map_by_name(st->obj, name.c_str());
  if (!m) { *what = "no map " + name; return -ENOENT; }
  return bpf_map__fd(m);
}

}  // namespace ebpf

using namespace ebpf;

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
  return (new ApplyWorker(env, st, std::move(groups)))->Start();
}

Napi::Value EbpfMapDump(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Loaded> st;
  if (HandleArg(info, &st) < 0) return env.Undefined();
  if (info.Length() < 2 || !info[1].IsString()) {
    Napi::TypeError::New(env, "ebpfMapDump(handle, mapName)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return (new DumpWorker(env, st, info[1].As<Napi::String>().Utf8Value()))->Start();
}

}  // namespace kpng
