#pragma once
// Library API of the backward pass: a pattern's dQ, dK and dV from one call, after a forward built
// with save_lse (its O and log-sum-exp are the backward's inputs).
//
//   splat::BuildOptions opt;
//   opt.save_lse = true;
//   splat::Kernel fwd = splat::build_kernel(p, opt);
//   splat::BackwardKernel bwd = splat::build_backward(p, opt);
//   fwd.launch(q, k, v, o, stream, lse);
//   bwd.launch(q, k, v, o, dout, lse, dq, dk, dv, stream);
//
// Every output row is written by one block: the gradients are the same bits run to run.
#include <memory>

#include "libsplat/analysis/acsr.h"
#include "libsplat/codegen/backward.h"
#include "libsplat/pattern/pattern.h"
#include "libsplat/runtime/kernel.h"
#include "libsplat/runtime/runtime.h"

namespace splat {

class BackwardKernel {
 public:
  BackwardKernel(std::shared_ptr<const BackwardModule> gen, std::shared_ptr<Module> mod, int64_t batch_heads);
  // Device pointers in the problem's dtype: q, o, dout, dq [batch, heads, seq_len, head_dim]; k, v, dk,
  // dv [batch, kv_heads, kv_len, head_dim]; lse [batch, heads, seq_len] fp32 (the forward's). The
  // kernels run in order on stream (a cudaStream_t; nullptr = default) and share this object's
  // workspace: launches on different streams must not overlap.
  void launch(const void* q, const void* k, const void* v, const void* o, const void* dout, const float* lse, void* dq,
              void* dk, void* dv, void* stream = nullptr) const;
  // A packed variable-length batch (a problem with varlen): q, o, dout, dq [total_tokens, heads,
  // head_dim]; k, v, dk, dv [total_tokens, kv_heads, head_dim]; lse [total_tokens, heads] (the
  // forward's launch_varlen); cu_seqlens [sequences + 1] int32 in device memory, as the forward's.
  // Rows and keys past the last sequence's end are not written. The workspace grows to the number of
  // sequences. launch() on such a kernel, or this on another, is std::invalid_argument.
  void launch_varlen(const void* q, const void* k, const void* v, const void* o, const void* dout, const float* lse,
                     void* dq, void* dk, void* dv, const int* cu_seqlens, int64_t sequences, void* stream = nullptr) const;
  const BackwardModule& module() const { return *gen_; }  // per-head patterns: head group 0's
  // Per-head patterns: one kernel per head group (each built for its group's problem), launched in
  // turn by launch() on its stream; empty otherwise. Over grouped K/V heads the groups share one
  // workspace (BackwardModule::shared_kv), and the last group's kernels write dK and dV.
  const std::vector<BackwardKernel>& head_groups() const { return groups_; }
  static BackwardKernel of_head_groups(std::vector<BackwardKernel> groups);

 private:
  void share_workspace(int64_t units) const;
  std::shared_ptr<const BackwardModule> gen_;
  std::shared_ptr<Module> mod_;
  int64_t bh_;
  std::vector<EntryLaunch> launches_;
  std::shared_ptr<DeviceBuffer> table_;
  mutable std::shared_ptr<DeviceBuffer> ws_;  // grown by launch_varlen
  std::vector<BackwardKernel> groups_;
};

// Generates the problem's backward module (generate_backward), compiles it for opt.arch ("": this
// GPU's) and loads it. Throws Error for a problem the backward kernels do not take. The first form
// takes a problem of one pattern (a head group's too); the second runs analyze() and, for per-head
// patterns, builds a kernel per head group (of_head_groups).
BackwardKernel build_backward(const Problem& problem, const Acsr& acsr, const BuildOptions& opt = {});
BackwardKernel build_backward(const Problem& problem, const BuildOptions& opt = {});

}  // namespace splat
