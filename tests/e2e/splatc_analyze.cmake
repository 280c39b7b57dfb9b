# splatc analyze / show (docs/splatc-patterns.md). Working directory: the repository root.
trsplat_e2e(splatc_analyze_window OUTPUT "nnz +2035456.*density 0\\.1213.*row segments +3 "
            COMMAND splatc analyze patterns/window-4k-bf16.json --validate)
trsplat_e2e(splatc_analyze_longformer_json OUTPUT "\"kv_len\":4096.*\"metadata_bytes\":\\{\"acsr\":[0-9]+,\"blockmask128\":[0-9]+,\"bsr128\":[0-9]+.*\"nnz\":2158064"
            COMMAND splatc analyze patterns/longformer-4k-bf16.json --json)
trsplat_e2e(splatc_analyze_bigbird_validate OUTPUT "validated"
            COMMAND splatc analyze patterns/bigbird-4k-bf16.json --validate)
trsplat_e2e(splatc_analyze_ragged OUTPUT "seq_len 333, kv_len 517.*validated"
            COMMAND splatc analyze tests/splat/data/ragged_causal.json --validate)
trsplat_e2e(splatc_analyze_bad_negative EXIT 2
            OUTPUT "bad_negative.json: pattern.union\\[1\\].window.left: expected a non-negative integer, got -3"
            COMMAND splatc analyze tests/splat/data/bad_negative.json)
trsplat_e2e(splatc_analyze_bad_syntax EXIT 2 OUTPUT "bad_syntax.json:3:[0-9]+: invalid JSON"
            COMMAND splatc analyze tests/splat/data/bad_syntax.json)
trsplat_e2e(splatc_analyze_bad_unknown_field EXIT 2 OUTPUT "pattern.strided.phase: unknown field"
            COMMAND splatc analyze tests/splat/data/bad_unknown_field.json)
trsplat_e2e(splatc_analyze_too_large EXIT 2 OUTPUT "seq_len: problem too large"
            COMMAND splatc analyze tests/splat/data/bad_too_large.json)
trsplat_e2e(splatc_analyze_missing_file EXIT 2 OUTPUT "cannot read"
            COMMAND splatc analyze tests/splat/data/no_such_file.json)
trsplat_e2e(splatc_show_bad_extension EXIT 2 OUTPUT "\\.svg or \\.png"
            COMMAND splatc show patterns/window-4k-bf16.json -o /tmp/splatc-e2e-show.bmp)
trsplat_e2e(splatc_show_png COMMAND splatc show patterns/bigbird-4k-bf16.json -o /tmp/splatc-e2e-bigbird.png)
trsplat_e2e(splatc_show_zoom COMMAND splatc show patterns/strided-4k-bf16.json --rows 1000:1200 --cols 900:1300
            -o /tmp/splatc-e2e-strided-zoom.png)
trsplat_e2e(splatc_show_bad_zoom EXIT 2 OUTPUT "--cols: expected A:B with 0 <= A < B <= 4096, got 0:5000"
            COMMAND splatc show patterns/strided-4k-bf16.json --cols 0:5000 -o /tmp/splatc-e2e-bad-zoom.png)
trsplat_e2e(splatc_show_svg COMMAND splatc show tests/splat/data/ragged_causal.json -o /tmp/splatc-e2e-ragged.svg)
trsplat_e2e(splatc_analyze_coo COMMAND splatc analyze tests/splat/data/ragged_causal.json --coo /tmp/splatc-e2e-ragged.coo)
# Per-head patterns: every head group's analysis in turn, or one head's (--head); --coo needs a head.
trsplat_e2e(splatc_analyze_head_patterns
            OUTPUT "head-windows-ragged-bf16: per-head patterns, 5 head groups of 8 heads.*head-windows-ragged-bf16\\.h0: .*head group +heads 0 2 of 8.*validated.*head-windows-ragged-bf16\\.h4: .*head group +heads 6 of 8"
            COMMAND splatc analyze tests/gpu/head-windows-ragged-bf16.json --validate)
trsplat_e2e(splatc_analyze_head_one OUTPUT "\"group_heads\":\\[3\\].*\"nnz\":"
            COMMAND splatc analyze tests/gpu/head-windows-ragged-bf16.json --head 3 --json)
trsplat_e2e(splatc_analyze_head_range EXIT 2 OUTPUT "error: --head: expected a head in .0, 8., got 8"
            COMMAND splatc analyze tests/gpu/head-windows-ragged-bf16.json --head 8)
trsplat_e2e(splatc_analyze_head_coo EXIT 2 OUTPUT "--coo: per-head patterns: --coo writes one head's positions; add --head H"
            COMMAND splatc analyze tests/gpu/head-windows-ragged-bf16.json --coo /tmp/splatc-e2e-head.coo)
trsplat_e2e(splatc_show_head COMMAND splatc show tests/gpu/head-windows-ragged-bf16.json --head 6 -o /tmp/splatc-e2e-head.svg)
# --columns: the column ACSR (the query rows of each key) of a window is a window again.
trsplat_e2e(splatc_analyze_columns OUTPUT "column ACSR +3 segments \\(3 affine, 0 tabulated over 0 keys\\), widest column 513 rows.*keys .257, 3840.: start j-256, stride 1, count 513"
            COMMAND splatc analyze patterns/window-4k-bf16.json --columns)
trsplat_e2e(splatc_analyze_columns_json OUTPUT "\"columns\":\\{\"affine\":3,\"max_column_nnz\":513,\"metadata_bytes\":108,\"segments\":3,\"tabulated\":0,\"tabulated_keys\":0\\}"
            COMMAND splatc analyze patterns/window-4k-bf16.json --columns --json)
