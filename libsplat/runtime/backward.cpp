#include "libsplat/runtime/backward.h"

#include <algorithm>
#include <stdexcept>

#include "libsplat/analysis/analysis.h"
#include "libsplat/compile/nvrtc.h"

namespace splat {

BackwardKernel::BackwardKernel(std::shared_ptr<const BackwardModule> gen, std::shared_ptr<Module> mod, int64_t batch_heads)
    : gen_(std::move(gen)), mod_(std::move(mod)), bh_(batch_heads) {
  launches_ = entry_launches(*mod_, gen_->kernels);
  if (!gen_->table.empty()) {
    table_ = std::make_shared<DeviceBuffer>(gen_->table.size() * sizeof(int32_t));
    table_->upload(gen_->table.data(), gen_->table.size() * sizeof(int32_t));
  }
  ws_ = std::make_shared<DeviceBuffer>(static_cast<size_t>(bh_ * gen_->workspace_floats_per_bh) * sizeof(float));
}

BackwardKernel BackwardKernel::of_head_groups(std::vector<BackwardKernel> groups) {
  if (groups.empty()) throw std::invalid_argument("BackwardKernel::of_head_groups: no head group");
  BackwardKernel all = groups.front();
  all.groups_ = std::move(groups);
  all.share_workspace(1);
  return all;
}

// Per-head patterns over grouped K/V heads (BackwardModule::shared_kv): one workspace for every head
// group, of the largest group's size for `units` batch entries or sequences (at least what the groups
// hold now); groups without it keep their own.
void BackwardKernel::share_workspace(int64_t units) const {
  if (groups_.empty() || !groups_.front().gen_->shared_kv) return;
  size_t bytes = 0;
  for (const BackwardKernel& g : groups_)
    bytes = std::max({bytes, g.ws_->size(), static_cast<size_t>(units * g.bh_ * g.gen_->workspace_floats_per_bh) * sizeof(float)});
  std::shared_ptr<DeviceBuffer> ws = groups_.front().ws_;
  if (ws->size() < bytes) ws = std::make_shared<DeviceBuffer>(bytes);
  for (const BackwardKernel& g : groups_) g.ws_ = ws;
}

void BackwardKernel::launch(const void* q, const void* k, const void* v, const void* o, const void* dout, const float* lse,
                            void* dq, void* dk, void* dv, void* stream) const {
  if (!groups_.empty()) {  // disjoint heads of dq, dk and dv (over grouped K/V heads: one workspace, dk and dv at the end)
    for (const BackwardKernel& g : groups_) g.launch(q, k, v, o, dout, lse, dq, dk, dv, stream);
    return;
  }
  if (gen_->varlen) throw std::invalid_argument("a packed variable-length batch's backward: launch_varlen gives its cu_seqlens");
  void* ws = ws_->get();
  const void* table = table_ ? table_->get() : nullptr;
  void* args[] = {&q, &k, &v, &o, &dout, &lse, &dq, &dk, &dv, &ws, &table};
  launch_entries(launches_, bh_, args, stream);
}

void BackwardKernel::launch_varlen(const void* q, const void* k, const void* v, const void* o, const void* dout,
                                   const float* lse, void* dq, void* dk, void* dv, const int* cu_seqlens,
                                   int64_t sequences, void* stream) const {
  if (!groups_.empty()) {
    share_workspace(sequences);  // grown to the sequences, as each group would grow its own
    for (const BackwardKernel& g : groups_) g.launch_varlen(q, k, v, o, dout, lse, dq, dk, dv, cu_seqlens, sequences, stream);
    return;
  }
  if (!gen_->varlen) throw std::invalid_argument("launch_varlen: the backward was built for a plain batch (launch)");
  if (sequences < 0 || cu_seqlens == nullptr) throw std::invalid_argument("launch_varlen: no cu_seqlens");
  if (sequences == 0) return;
  const int64_t grid_y = sequences * bh_;  // bh_: heads (a packed batch has batch 1)
  const size_t ws_bytes = static_cast<size_t>(grid_y * gen_->workspace_floats_per_bh) * sizeof(float);
  if (!ws_ || ws_->size() < ws_bytes) ws_ = std::make_shared<DeviceBuffer>(ws_bytes);
  void* ws = ws_->get();
  const void* table = table_ ? table_->get() : nullptr;
  void* args[] = {&q, &k, &v, &o, &dout, &lse, &dq, &dk, &dv, &ws, &table, &cu_seqlens};
  launch_entries(launches_, grid_y, args, stream);
}

BackwardKernel build_backward(const Problem& problem, const Acsr& acsr, const BuildOptions& opt) {
  const DeviceInfo dev = device_info();
  const std::string arch = opt.arch.empty() ? dev.target_arch() : opt.arch;
  auto gen = std::make_shared<const BackwardModule>(generate_backward(problem, acsr, opt.backward_tuning, arch));
  const CompileResult img = nvrtc_compile(gen->source, gen->name + ".bwd.cu", arch, load_target(dev, arch));
  return BackwardKernel(gen, std::make_shared<Module>(img.image), problem.batch * served_heads(problem));
}

BackwardKernel build_backward(const Problem& problem, const BuildOptions& opt) {
  if (problem.head_groups.empty()) return build_backward(problem, analyze(problem), opt);
  check_backward(problem);  // before any group's work
  std::vector<BackwardKernel> groups;
  for (const Problem& g : head_group_problems(problem)) groups.push_back(build_backward(g, analyze(g), opt));
  return BackwardKernel::of_head_groups(std::move(groups));
}

}  // namespace splat
