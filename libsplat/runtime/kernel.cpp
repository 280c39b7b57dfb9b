#include "libsplat/runtime/kernel.h"

#include <cuda_runtime_api.h>
#include <spdlog/spdlog.h>

#include <vector>

#include "libsplat/analysis/analysis.h"
#include "libsplat/compile/nvrtc.h"

namespace splat {

namespace {
constexpr size_t kTensorMapBytes = 128;  // sizeof(CUtensorMap)
}

std::vector<EntryLaunch> entry_launches(const Module& mod, const std::vector<KernelDesc>& kernels) {
  std::vector<EntryLaunch> out;
  for (const KernelDesc& d : kernels) {
    const size_t smem = static_cast<size_t>(d.smem_dynamic);
    out.push_back({mod.kernel(d.name, smem), d.grid_x, d.block, smem, d.programmatic});
  }
  return out;
}

Kernel::Kernel(std::shared_ptr<const GeneratedModule> gen, std::shared_ptr<Module> mod, KernelKind kind,
               int64_t batch_heads)
    : gen_(std::move(gen)), mod_(std::move(mod)), kind_(kind), bh_(batch_heads) {
  const std::vector<KernelDesc>& ks = kind == KernelKind::Fused ? gen_->fused : gen_->pipeline;
  if (ks.empty()) throw std::invalid_argument(std::string("module has no ") + kernel_kind_name(kind) + " kernel");
  launches_ = entry_launches(*mod_, ks);
  if (!gen_->table.empty()) {
    table_ = std::make_shared<DeviceBuffer>(gen_->table.size() * sizeof(int32_t));
    table_->upload(gen_->table.data(), gen_->table.size() * sizeof(int32_t));
  }
  if (kind == KernelKind::Fused && !gen_->tensor_maps.empty())
    tmaps_ = std::make_shared<DeviceBuffer>(gen_->tensor_maps.size() * kTensorMapBytes);
  const size_t bh = static_cast<size_t>(bh_);
  if (kind == KernelKind::Fused && gen_->workspace_floats_per_bh > 0)
    ws_ = std::make_shared<DeviceBuffer>(bh * static_cast<size_t>(gen_->workspace_floats_per_bh) * sizeof(float));
  if (kind == KernelKind::Pipeline && gen_->scores_floats_per_bh > 0)
    scores_ = std::make_shared<DeviceBuffer>(bh * static_cast<size_t>(gen_->scores_floats_per_bh) * sizeof(float));
}

// The streams groups 1.. run on (non-blocking: no implicit order with the legacy default stream,
// which would serialise the groups), and the events that fork from and join into the launch's stream.
struct Kernel::Fork {
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> joins;
  cudaEvent_t fork = nullptr;
  explicit Fork(size_t n) {
    cuda_check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "cudaEventCreate");
    for (size_t g = 0; g < n; ++g) {
      streams.emplace_back();
      cuda_check(cudaStreamCreateWithFlags(&streams.back(), cudaStreamNonBlocking), "cudaStreamCreate");
      joins.emplace_back();
      cuda_check(cudaEventCreateWithFlags(&joins.back(), cudaEventDisableTiming), "cudaEventCreate");
    }
  }
  ~Fork() {
    for (cudaEvent_t e : joins) cudaEventDestroy(e);
    for (cudaStream_t s : streams) cudaStreamDestroy(s);
    cudaEventDestroy(fork);
  }
  Fork(const Fork&) = delete;
  Fork& operator=(const Fork&) = delete;
};

template <class F>
void Kernel::launch_groups(void* stream, F launch_group) const {
  const cudaStream_t main = static_cast<cudaStream_t>(stream);
  cuda_check(cudaEventRecord(fork_->fork, main), "cudaEventRecord (head groups)");
  for (size_t g = 1; g < groups_.size(); ++g) {
    cuda_check(cudaStreamWaitEvent(fork_->streams[g - 1], fork_->fork, 0), "cudaStreamWaitEvent");
    launch_group(groups_[g], fork_->streams[g - 1]);
  }
  launch_group(groups_[0], main);
  for (size_t g = 1; g < groups_.size(); ++g) {
    cuda_check(cudaEventRecord(fork_->joins[g - 1], fork_->streams[g - 1]), "cudaEventRecord (head groups)");
    cuda_check(cudaStreamWaitEvent(main, fork_->joins[g - 1], 0), "cudaStreamWaitEvent");
  }
}

Kernel Kernel::of_head_groups(std::vector<Kernel> groups) {
  if (groups.empty()) throw std::invalid_argument("of_head_groups: no head group");
  Kernel all = groups.front();  // group 0's module and kind
  all.bh_ = 0;
  for (const Kernel& g : groups) {
    if (g.kind_ != all.kind_ || g.gen_->varlen != all.gen_->varlen)
      throw std::invalid_argument("of_head_groups: the groups' kernels differ in kind");
    all.bh_ += g.bh_;
  }
  all.fork_ = std::make_shared<Fork>(groups.size() - 1);
  all.groups_ = std::move(groups);
  return all;
}

const void* Kernel::tensor_maps(const void* k, const void* v, void* stream) const {
  if (!tmaps_) return nullptr;
  if (k != maps_k_ || v != maps_v_) {
    struct alignas(64) Map { unsigned char bytes[kTensorMapBytes]; };
    std::vector<Map> host(gen_->tensor_maps.size());
    for (size_t i = 0; i < host.size(); ++i) {
      const TensorMapDesc& d = gen_->tensor_maps[i];
      encode_tensor_map(host[i].bytes, d.tensor == "k" ? k : v, d.dims, d.strides, d.box);
    }
    // Pageable source: the copy is staged before this returns, and ordered before the launches.
    cuda_check(cudaMemcpyAsync(tmaps_->get(), host.data(), host.size() * sizeof(Map), cudaMemcpyHostToDevice,
                               static_cast<cudaStream_t>(stream)),
               "cudaMemcpyAsync (tensor maps)");
    maps_k_ = k;
    maps_v_ = v;
  }
  return tmaps_->get();
}

void Kernel::launch(const void* q, const void* k, const void* v, void* o, void* stream, float* lse) const {
  if (!groups_.empty()) {
    launch_groups(stream, [&](const Kernel& g, void* s) { g.launch(q, k, v, o, s, lse); });
    return;
  }
  if (gen_->varlen) throw std::invalid_argument("a packed variable-length batch's kernel: launch_varlen gives its cu_seqlens");
  void* ws = ws_ ? ws_->get() : nullptr;
  void* scores = scores_ ? scores_->get() : nullptr;
  const void* table = table_ ? table_->get() : nullptr;
  const void* tmaps = tensor_maps(k, v, stream);
  void* args[] = {&q, &k, &v, &o, &ws, &scores, &table, &tmaps, &lse};  // lse: only when the module saves it
  launch_entries(launches_, bh_, args, stream);
}

void Kernel::launch_varlen(const void* q, const void* k, const void* v, void* o, const int* cu_seqlens, int64_t sequences,
                          void* stream, float* lse) const {
  if (!groups_.empty()) {
    launch_groups(stream, [&](const Kernel& g, void* s) { g.launch_varlen(q, k, v, o, cu_seqlens, sequences, s, lse); });
    return;
  }
  if (!gen_->varlen) throw std::invalid_argument("launch_varlen: the kernel was built for a plain batch (launch)");
  if (sequences < 0 || cu_seqlens == nullptr) throw std::invalid_argument("launch_varlen: no cu_seqlens");
  if (sequences == 0) return;
  const int64_t grid_y = sequences * bh_;  // bh_: heads (a packed batch has batch 1)
  const size_t ws_bytes = static_cast<size_t>(grid_y * gen_->workspace_floats_per_bh) * sizeof(float);
  if (ws_bytes > 0 && (!ws_ || ws_->size() < ws_bytes)) ws_ = std::make_shared<DeviceBuffer>(ws_bytes);
  void* ws = ws_ ? ws_->get() : nullptr;
  void* scores = nullptr;
  const void* table = table_ ? table_->get() : nullptr;
  const void* tmaps = tensor_maps(k, v, stream);  // a band kernel's, over max_total_tokens (it reads no token past the batch's)
  void* args[] = {&q, &k, &v, &o, &ws, &scores, &table, &tmaps, &cu_seqlens, &lse};  // lse: when saved
  launch_entries(launches_, grid_y, args, stream);
}

Kernel build_kernel(const Problem& problem, const Acsr& acsr, const BuildOptions& opt) {
  if (!problem.head_groups.empty())
    throw std::invalid_argument("build_kernel: per-head patterns have an ACSR per head group (build_kernel(problem))");
  DeviceInfo dev = device_info();
  CodegenOptions co;
  co.arch = opt.arch.empty() ? dev.target_arch() : opt.arch;
  KernelKind kind = opt.kind;
  if (kind == KernelKind::Fused && opt.fallback && !problem.varlen) {  // a packed batch: fused kernels only
    const EngineChoice engine = choose_engine(problem, co.arch);
    if (!engine.tensor_cores) {
      spdlog::info("{}: no fused kernel: {}; the pipeline runs", problem.name, engine.reason);
      kind = KernelKind::Pipeline;
    }
  }
  co.fused = kind == KernelKind::Fused;
  co.pipeline = kind == KernelKind::Pipeline;
  co.save_lse = opt.save_lse;
  co.tuning = resolve_tuning(problem, co.arch, opt.tuning, opt.cache).tuning;
  auto gen = std::make_shared<const GeneratedModule>(generate(problem, acsr, co));
  const std::string& arch = co.arch;
  CompileResult img = nvrtc_compile(gen->source, gen->name + ".cu", arch, load_target(dev, arch));
  auto mod = std::make_shared<Module>(img.image);
  return Kernel(gen, mod, kind, problem.batch * served_heads(problem));
}

Kernel build_kernel(const Problem& problem, const BuildOptions& opt) {
  if (problem.head_groups.empty()) return build_kernel(problem, analyze(problem), opt);
  std::vector<Kernel> groups;
  for (const Problem& g : head_group_problems(problem)) groups.push_back(build_kernel(g, analyze(g), opt));
  return Kernel::of_head_groups(std::move(groups));
}

}  // namespace splat
