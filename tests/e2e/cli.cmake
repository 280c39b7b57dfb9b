# Shared CLI conventions (docs/cli.md).
trsplat_e2e(splatc_version OUTPUT "splatc [0-9]+\\.[0-9]+" COMMAND splatc --version)
trsplat_e2e(splatc_no_args EXIT 2 COMMAND splatc)
trsplat_e2e(splatc_bad_flag EXIT 2 OUTPUT "unknown option '--no-such-flag'" COMMAND splatc --no-such-flag)
# A word where the command should be is named, with the list of commands (global options skipped).
trsplat_e2e(splatc_bad_command EXIT 2 OUTPUT "unknown command 'bogus' \\(commands: analyze, show, emit, bench, tune\\)"
            COMMAND splatc -vv --max-work 5 bogus)
trsplat_e2e(trverify_version OUTPUT "trverify [0-9]+\\.[0-9]+" COMMAND trverify --version)
trsplat_e2e(trverify_bad_flag EXIT 2 COMMAND trverify --no-such-flag)
trsplat_e2e(splatc_flags_after_subcommand OUTPUT "nnz" COMMAND splatc analyze patterns/window-4k-bf16.json -q)
# -v is info, -vv debug (docs/cli.md): the analysis time is a debug line.
trsplat_e2e(splatc_vv_debug OUTPUT "debug: analysis [0-9.]+ ms" COMMAND splatc -vv analyze patterns/window-4k-bf16.json)
# "-" reads the pattern from standard input (named stdin, located as <stdin> in errors).
trsplat_e2e(splatc_stdin_pattern OUTPUT "window-4k-bf16: seq_len 4096" STDIN ${PROJECT_SOURCE_DIR}/patterns/window-4k-bf16.json
            COMMAND splatc analyze -)
trsplat_e2e(splatc_stdin_bad EXIT 2 OUTPUT "error: <stdin>:1:1: invalid JSON" STDIN ${PROJECT_SOURCE_DIR}/tests/gpu/CMakeLists.txt
            COMMAND splatc analyze -)
# The man page and the bash completion come from the CLI definition (installed by cmake --install).
trsplat_e2e(splatc_man OUTPUT "\\.SS bench" COMMAND splatc --man)
trsplat_e2e(trverify_completion OUTPUT "complete -o filenames -F _trverify trverify" COMMAND trverify --bash-completion)
