# splatc emit (no GPU needed) and bench without a GPU.
set(_emit_dir ${CMAKE_BINARY_DIR}/e2e-emit)
trsplat_e2e(splatc_emit_cuda OUTPUT "window-4k-bf16\\.cu.*manifest\\.json"
            COMMAND splatc emit patterns/window-4k-bf16.json --target cuda --arch sm_90 -o ${_emit_dir}/cuda)
trsplat_e2e(splatc_emit_ptx OUTPUT "strided-4k-fp32\\.ptx.*manifest\\.json"
            COMMAND splatc emit patterns/strided-4k-fp32.json --target ptx --arch sm_80 -o ${_emit_dir}/ptx)
trsplat_e2e(splatc_emit_bigbird_table OUTPUT "bigbird-4k-bf16\\.table\\.bin"
            COMMAND splatc emit patterns/bigbird-4k-bf16.json --target ptx --arch sm_90 -o ${_emit_dir}/bigbird)
# --target cubin: the CUBIN, and a line per kernel with what ptxas made of it (also in the manifest).
trsplat_e2e(splatc_emit_cubin OUTPUT "splat_fused_p0: [0-9]+ registers, spills [0-9]+ B stored / [0-9]+ B loaded.*[0-9]+ blocks? per SM \\([0-9]+% occupancy, bound by [a-z ]+\\).*splat_spmm: .*window-4k-bf16\\.cubin.*manifest\\.json"
            COMMAND splatc emit patterns/window-4k-bf16.json --target cubin --arch sm_90a -o ${_emit_dir}/cubin)
# Hopper wgmma at head_dim 128: the manifest names the engine and the tensor maps' 64-column boxes.
trsplat_e2e(splatc_emit_wgmma_d128 OUTPUT "window-4k-d128-bf16\\.ptx.*manifest\\.json"
            COMMAND splatc emit patterns/d128/window-4k-d128-bf16.json --target ptx --arch sm_90a -o ${_emit_dir}/d128)
# --explain: the selection (engine, kernel family, reasons) before the written files.
trsplat_e2e(splatc_emit_explain OUTPUT "engine: wgmma.*splat_fused_p0: band kernel.*why: the pattern is a band.*manifest\\.json"
            COMMAND splatc emit patterns/window-4k-bf16.json --target cuda --arch sm_90a --explain -o ${_emit_dir}/explain)
# head_dim 72: the mma.sync engine pads it to 80; 36 (rows not of whole 16 bytes): no fused engine,
# the pipeline alone is emitted and --explain says why; asked for the fused kernel alone, exit 2 with
# the way out.
trsplat_e2e(splatc_emit_padded_head_dim OUTPUT "engine: mma.sync .*head_dim 72 padded to 80.*manifest\\.json"
            COMMAND splatc emit patterns/window-4k-bf16.json --head-dim 72 --target cuda --arch sm_90a --explain
                    -o ${_emit_dir}/d72)
trsplat_e2e(splatc_emit_pipeline_fallback OUTPUT "engine: cuda cores \\(no tensor-core engine for head_dim 36.*no fused kernel.*manifest\\.json"
            COMMAND splatc emit patterns/window-4k-bf16.json --head-dim 36 --target ptx --arch sm_80 --explain
                    -o ${_emit_dir}/d36)
trsplat_e2e(splatc_emit_fused_head_dim EXIT 2 OUTPUT "head_dim: the fused kernel has no engine for head_dim 264 in bf16.*--kernel pipeline"
            COMMAND splatc emit patterns/window-4k-bf16.json --head-dim 264 --kernel fused -o ${_emit_dir}/d264)
# --tune takes the tuning keys; a key that is not one (an experiment that lost) is a usage error.
trsplat_e2e(splatc_emit_tune OUTPUT "32 rows per warp \\(tuning\\).*manifest\\.json"
            COMMAND splatc emit patterns/window-4k-bf16.json --target cuda --arch sm_80 --tune mw=32,stages=3 --explain
                    -o ${_emit_dir}/tune)
trsplat_e2e(splatc_emit_bad_tune EXIT 2 OUTPUT "--tune.*unknown key 'lazy'"
            COMMAND splatc emit patterns/window-4k-bf16.json --tune lazy=1 -o ${_emit_dir}/bad)
trsplat_e2e(splatc_bench_bad_tune EXIT 2 OUTPUT "--tune.*must be 2 or 3"
            COMMAND splatc bench patterns/window-4k-bf16.json --tune stages=4)
trsplat_e2e(splatc_emit_bad_arch EXIT 2 OUTPUT "--arch"
            COMMAND splatc emit patterns/window-4k-bf16.json --arch sm_61 -o ${_emit_dir}/bad)
# An architecture NVRTC does not know is a usage error naming the supported ones (not exit 3 from a compile).
trsplat_e2e(splatc_emit_unknown_arch EXIT 2 OUTPUT "supported: sm_80"
            COMMAND splatc emit patterns/window-4k-bf16.json --arch sm_99 -o ${_emit_dir}/bad99)
trsplat_e2e(splatc_emit_bad_target EXIT 2 COMMAND splatc emit patterns/window-4k-bf16.json --target sass -o ${_emit_dir}/bad)
trsplat_e2e(splatc_emit_missing_file EXIT 2 COMMAND splatc emit patterns/no-such-pattern.json -o ${_emit_dir}/bad)
# CI machines have no GPU: bench reports it and exits 3 (on a GPU machine use scripts/bench-gpu).
trsplat_e2e(splatc_bench_no_gpu EXIT 3 OUTPUT "no usable GPU" COMMAND splatc bench patterns/window-4k-bf16.json)
# A packed variable-length batch: a window runs the band kernel per sequence (TMA over the packed
# tokens; no pipeline), launched over sequences*heads with cu_seqlens; the pipeline alone is refused;
# analyze says so.
trsplat_e2e(splatc_emit_varlen OUTPUT "grid 128 x sequences\\*heads.*closed form per sequence of a packed batch.*K/V by TMA.*varlen-window-bf16\\.ptx.*manifest\\.json"
            COMMAND splatc emit patterns/varlen-window-bf16.json --target ptx --arch sm_90a --explain --no-resources
                    -o ${_emit_dir}/varlen)
trsplat_e2e(splatc_emit_varlen_pipeline EXIT 2 OUTPUT "varlen: the pipeline kernels do not take packed variable-length batches"
            COMMAND splatc emit patterns/varlen-window-bf16.json --kernel pipeline -o ${_emit_dir}/varlen-pipe)
trsplat_e2e(splatc_analyze_varlen OUTPUT "varlen +sequences of up to seq_len tokens packed, at most 524288 tokens.*64 sequences, 251923 tokens"
            COMMAND splatc analyze patterns/varlen-window-bf16.json)
# Per-head patterns: a module per head group (NAME.hG files), each group's selection and resources.
trsplat_e2e(splatc_emit_head_patterns
            OUTPUT "head group 0 \\(heads 0 1 2 3\\):.*tuning: .*grid [0-9]+ x batch\\*group_heads.*head group 3 \\(heads 12 13 14 15\\):.*head-windows-16k-bf16\\.h0\\.ptx.*head-windows-16k-bf16\\.h3\\.ptx.*manifest\\.json"
            COMMAND splatc emit patterns/head-windows-16k-bf16.json --target ptx --arch sm_90a --explain --no-resources
                    -o ${_emit_dir}/heads)
# --pass: the backward module (NAME.bwd.*, the manifest's backward section with its entry points in
# launch order: on wgmma dQ and dK/dV in one launch, then each pass's split-tile combine), after a forward
# that saves the log-sum-exp (both); problems it does not take, a bad
# --pass or --tune-backward: exit 2 with the reason.
trsplat_e2e(splatc_emit_backward OUTPUT "splat_bwd_delta: .*splat_bwd_p0: [0-9]+ registers.*splat_bwd_dq_p0_combine: .*splat_bwd_dkv_p0_combine: .*longformer-4k-bf16\\.cu.*longformer-4k-bf16\\.bwd\\.cu.*manifest\\.json"
            COMMAND splatc emit patterns/longformer-4k-bf16.json --pass both --target cuda --arch sm_90a -o ${_emit_dir}/bwd)
trsplat_e2e(splatc_emit_backward_only OUTPUT "strided-4k-bf16\\.bwd\\.ptx.*manifest\\.json"
            COMMAND splatc emit patterns/strided-4k-bf16.json --pass backward --target ptx --arch sm_80 --no-resources
                    -o ${_emit_dir}/bwd-only)
# --explain with --pass backward: the backward's engine, mode and tuning with why (blocked-256 at 4k: blocks head
# by head, three stages), then each entry point's launch.
trsplat_e2e(splatc_emit_backward_explain
            OUTPUT "backward engine: wgmma, deterministic mode.*blocks head by head \\(order 1\\): 128 tiles a head.*3 stages: every tile walks at most 4 key tiles.*splat_bwd_p0: grid 128 x batch\\*heads, block 128, 68096 B shared memory"
            COMMAND splatc emit patterns/blocked-4k-bf16.json --pass backward --target ptx --arch sm_90a --explain --no-resources
                    -o ${_emit_dir}/bwd-explain)
# fp32 storage: the 3xTF32 engine (tf32: one tf32 product); a head_dim that is not a multiple of 4 is refused.
trsplat_e2e(splatc_emit_backward_fp32 OUTPUT "splat_bwd_dq_p0: [0-9]+ registers.*window-4k-fp32\\.bwd\\.ptx.*manifest\\.json"
            COMMAND splatc emit patterns/window-4k-fp32.json --pass backward --target ptx --arch sm_90a -o ${_emit_dir}/bwd-fp32)
trsplat_e2e(splatc_emit_backward_tf32_head_dim EXIT 2
            OUTPUT "head_dim: the backward kernels need head_dim a multiple of 4 \\(tf32\\) and at most 128, got 30"
            COMMAND splatc emit patterns/window-4k-fp32.json --dtype tf32 --head-dim 30 --pass backward -o ${_emit_dir}/bwd-tf32)
# Per-head patterns: a backward module per head group (NAME.hG.bwd.*).
trsplat_e2e(splatc_emit_backward_head_patterns
            OUTPUT "head-bwd-ragged-bf16\\.h0\\.ptx.*head-bwd-ragged-bf16\\.h0\\.bwd\\.ptx.*head-bwd-ragged-bf16\\.h3\\.bwd\\.ptx.*manifest\\.json"
            COMMAND splatc emit tests/gpu/head-bwd-ragged-bf16.json --pass both --target ptx --arch sm_80 --no-resources
                    -o ${_emit_dir}/bwd-heads)
# Over grouped K/V heads: the groups share a workspace and the last group's module reduces dK/dV.
trsplat_e2e(splatc_emit_backward_head_patterns_gqa
            OUTPUT "splat_bwd_reduce: [0-9]+ registers.*head-windows-ragged-bf16\\.h4\\.bwd\\.ptx.*manifest\\.json"
            COMMAND splatc emit tests/gpu/head-windows-ragged-bf16.json --pass backward --target ptx --arch sm_90a
                    -o ${_emit_dir}/bwd-heads-gqa)
# A packed variable-length batch: the backward entries take cu_seqlens (the manifest's parameter 11); on
# wgmma dQ and dK/dV in one launch (splat_bwd_p0).
trsplat_e2e(splatc_emit_backward_varlen
            OUTPUT "splat_bwd_p0: [0-9]+ registers.*varlen-window-bf16\\.bwd\\.ptx.*manifest\\.json"
            COMMAND splatc emit patterns/varlen-window-bf16.json --pass both --target ptx --arch sm_90a -o ${_emit_dir}/bwd-varlen)
# --backward-mode fast: no dQ kernel, dQ stored from the dK/dV kernels' sums (fp32 storage too).
trsplat_e2e(splatc_emit_backward_fast
            OUTPUT "splat_bwd_dkv_p0: [0-9]+ registers.*splat_bwd_dq_store: .*window-4k-bf16\\.bwd\\.ptx.*manifest\\.json"
            COMMAND splatc emit patterns/window-4k-bf16.json --pass backward --backward-mode fast --target ptx --arch sm_90a
                    -o ${_emit_dir}/bwd-fast)
trsplat_e2e(splatc_emit_backward_fast_fp32 OUTPUT "splat_bwd_dq_store: .*window-4k-fp32\\.bwd\\.ptx.*manifest\\.json"
            COMMAND splatc emit patterns/window-4k-fp32.json --pass backward --backward-mode fast --target ptx --arch sm_90a
                    -o ${_emit_dir}/bwd-fast-fp32)
trsplat_e2e(splatc_emit_backward_bad_mode EXIT 2 OUTPUT "--backward-mode: quick not in"
            COMMAND splatc emit patterns/window-4k-bf16.json --pass backward --backward-mode quick -o ${_emit_dir}/bad)
trsplat_e2e(splatc_emit_bad_pass EXIT 2 OUTPUT "--pass: sideways not in"
            COMMAND splatc emit patterns/window-4k-bf16.json --pass sideways -o ${_emit_dir}/bad)
trsplat_e2e(splatc_bench_bad_tune_backward EXIT 2 OUTPUT "--tune-backward: backward tuning: cw must be 32 or 64, got '48'"
            COMMAND splatc bench patterns/window-4k-bf16.json --pass backward --tune-backward cw=48)
trsplat_e2e(splatc_bench_backward_pipeline EXIT 2 OUTPUT "--pass: the backward runs after the fused forward kernels"
            COMMAND splatc bench patterns/window-4k-bf16.json --pass both --kernel pipeline)
# --pass backward needs no pipeline: a pattern the pipeline does not take (46 runs in a row) still has
# its backward module (the forward's files are not written; --kernel both would refuse it).
trsplat_e2e(splatc_emit_backward_many_runs OUTPUT "many-runs-bf16\\.bwd\\.cu.*manifest\\.json"
            COMMAND splatc emit tests/splat/data/many_runs_bf16.json --pass backward --no-resources -o ${_emit_dir}/bwd-runs)
trsplat_e2e(splatc_emit_many_runs_pipeline EXIT 2 OUTPUT "pattern: the pipeline supports at most 32 runs per row"
            COMMAND splatc emit tests/splat/data/many_runs_bf16.json -o ${_emit_dir}/runs)
