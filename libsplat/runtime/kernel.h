#pragma once
// Library API: from a pattern to a loaded, launchable kernel in one call.
//
//   splat::Problem p = splat::load_problem("patterns/window-4k-bf16.json");
//   splat::BuildOptions opt;              // kind = Fused (default) or Pipeline; arch = "" (this GPU)
//   splat::Kernel k = splat::build_kernel(p, opt);
//   k.launch(q, k_, v, o, stream);   // device pointers, row-major: q, o [batch, heads, seq_len, head_dim],
//                                    // k_, v [batch, kv_heads, kv_len, head_dim]
//   // a packed variable-length batch ("varlen"): q, o [total, heads, d], k_, v [total, kv_heads, d]
//   k.launch_varlen(q, k_, v, o, cu_seqlens, sequences, stream);
//
// build_kernel analyses the pattern, generates CUDA for it, compiles it with NVRTC for the
// current GPU and loads it; the Kernel owns the device table and the workspace it needs. With
// per-head patterns ("head_patterns") it builds a kernel per head group, and launch runs them all.
#include <memory>
#include <string>
#include <vector>

#include "libsplat/analysis/acsr.h"
#include "libsplat/codegen/backward.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/compile/tuning_cache.h"
#include "libsplat/pattern/pattern.h"
#include "libsplat/runtime/runtime.h"

namespace splat {

struct BuildOptions {
  KernelKind kind = KernelKind::Fused;
  // Fused asked for and no fused engine takes the problem's head_dim (select.h: choose_engine):
  // build the pipeline instead (Kernel::kind() says which ran), or throw splat::Error when false.
  bool fallback = true;
  std::string arch;  // "" = the current device's (sm_90a on sm_90 devices, else sm_XY)
  bool save_lse = false;  // the kernels save each row's log-sum-exp (launch's lse; CodegenOptions::save_lse)
  // Fused-kernel tuning (codegen.h); it wins over the cache. Unset: the cache's entry for the
  // problem at the architecture compiled for, else the measured defaults (resolve_tuning).
  std::optional<KernelTuning> tuning;
  TuningCacheRef cache;  // a tuning cache (load_tuning_cache); none when empty
  BackwardTuning backward_tuning;  // build_backward's (backward.h); the defaults when unset
};

class Kernel {
 public:
  // Launches every kernel of the chosen kind on stream (a cudaStream_t; nullptr = default).
  // q, o: [batch, heads, seq_len, head_dim]; k, v: [batch, kv_heads, kv_len, head_dim]; device memory
  // in the problem's dtype, for the batch and heads of the problem it was built for. Kernels that
  // load K/V by TMA read tensor maps of k and v from a device buffer of this Kernel, rewritten
  // (stream-ordered) when k or v differ from the previous launch's: launches with different k or
  // v on different streams must not overlap.
  // Throws std::invalid_argument for a module of a packed variable-length batch (launch_varlen).
  // lse (a kernel built with save_lse; else ignored): each row's log-sum-exp, fp32 device memory laid
  // out as q's rows without head_dim ([batch, heads, seq_len]); null: not saved.
  void launch(const void* q, const void* k, const void* v, void* o, void* stream = nullptr, float* lse = nullptr) const;
  // A packed variable-length batch (Problem::varlen): q, o [total_tokens, heads, head_dim], k, v
  // [total_tokens, kv_heads, head_dim]; cu_seqlens: device memory, sequences + 1 int32 starts (0 first,
  // non-decreasing, each length at most the problem's seq_len). A multi-pass kernel's workspace grows
  // to the number of sequences (a reallocation waits for the device). Throws std::invalid_argument for
  // a module of a plain batch.
  // lse as launch's, laid out [total_tokens, heads].
  void launch_varlen(const void* q, const void* k, const void* v, void* o, const int* cu_seqlens, int64_t sequences,
                     void* stream = nullptr, float* lse = nullptr) const;
  KernelKind kind() const { return kind_; }
  // The generated module (per-head patterns: head group 0's; head_groups() has every group's).
  const GeneratedModule& module() const { return *gen_; }
  int64_t batch_heads() const { return bh_; }  // blocks along grid.y per launch (all groups together)
  // Per-head patterns: one kernel per head group, launched together by launch(); empty otherwise.
  const std::vector<Kernel>& head_groups() const { return groups_; }
  // A kernel that launches groups (the head groups of one problem, one kind) side by side: group 0
  // on the launch's stream, each other group on a stream of its own that waits for the launch's
  // stream and that the launch's stream then waits for (events; capturable in a CUDA graph), so
  // that the groups' grids overlap. Needs a GPU (it creates the streams and events).
  static Kernel of_head_groups(std::vector<Kernel> groups);

  // Internal: bench builds both kinds from one loaded module.
  Kernel(std::shared_ptr<const GeneratedModule> gen, std::shared_ptr<Module> mod, KernelKind kind, int64_t batch_heads);

 private:
  std::shared_ptr<const GeneratedModule> gen_;
  std::shared_ptr<Module> mod_;
  KernelKind kind_;
  int64_t bh_;
  std::vector<EntryLaunch> launches_;
  std::vector<Kernel> groups_;
  struct Fork;                  // head groups: their streams and events
  std::shared_ptr<Fork> fork_;
  template <class F> void launch_groups(void* stream, F launch_group) const;
  // The module's tensor maps for these k and v in device memory (encoded and copied when they are
  // not the last ones'), or null when it has none.
  const void* tensor_maps(const void* k, const void* v, void* stream) const;
  std::shared_ptr<DeviceBuffer> table_, scores_, tmaps_;
  mutable std::shared_ptr<DeviceBuffer> ws_;  // launch_varlen grows it
  // The k and v the tensor maps in tmaps_ were encoded for (re-encoded when a launch's differ).
  mutable const void* maps_k_ = nullptr;
  mutable const void* maps_v_ = nullptr;
};

// The entries of a generated module (forward or backward) looked up in its loaded module, in launch
// order (each one's dynamic shared memory limit raised as it needs).
std::vector<EntryLaunch> entry_launches(const Module& mod, const std::vector<KernelDesc>& kernels);

// A problem of one pattern (no head_groups: std::invalid_argument) and its ACSR.
Kernel build_kernel(const Problem& problem, const Acsr& acsr, const BuildOptions& opt = {});
// Runs analyze(); per-head patterns: a kernel per head group (of_head_groups).
Kernel build_kernel(const Problem& problem, const BuildOptions& opt = {});

}  // namespace splat
