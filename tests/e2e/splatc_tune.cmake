# splatc tune and the tuning cache, without a GPU: tune's no-GPU exit (3, as bench), emit reading a
# hand-written cache (--explain and manifest.json name the source), --tune over the cache, bad caches.
set(_tune_dir ${CMAKE_BINARY_DIR}/e2e-tune)
trsplat_e2e(splatc_tune_no_gpu EXIT 3 OUTPUT "no usable GPU"
            COMMAND splatc tune patterns/window-4k-bf16.json --budget 5 --cache ${_tune_dir}/no-gpu.json)
trsplat_e2e(splatc_tune_bad_budget EXIT 2 OUTPUT "--budget"
            COMMAND splatc tune patterns/window-4k-bf16.json --budget -1)
trsplat_e2e(splatc_tune_cache_and_no_cache EXIT 2 OUTPUT "--no-cache"
            COMMAND splatc tune patterns/window-4k-bf16.json --cache x.json --no-cache)
trsplat_e2e(splatc_bench_missing_cache EXIT 2 OUTPUT "missing\\.json: cannot read the tuning cache: no such file"
            COMMAND splatc bench patterns/window-4k-bf16.json --cache ${_tune_dir}/missing.json)
trsplat_e2e(splatc_emit_bad_dtype EXIT 2 OUTPUT "--dtype"
            COMMAND splatc emit patterns/window-4k-bf16.json --dtype fp64 -o ${_tune_dir}/bad)

# The steps, as one script: each runs splatc and checks its exit code and output.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/splatc_tune_cache.cmake [=[
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
function(step name want_rc regex)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL want_rc OR NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "${name}: exit ${rc} (expected ${want_rc}), output does not match /${regex}/ or exit differs:\n${out}\n${err}")
  endif()
  message(STATUS "${name}: ok")
endfunction()
set(P patterns/window-4k-bf16.json)
set(env ${CMAKE_COMMAND} -E env XDG_CACHE_HOME=${OUT}/xdg)
# 1. No cache yet: the defaults; the manifest gives the problem's cache key.
step(defaults 0 "tuning: the defaults \\(default; cache key [0-9a-f]+\\)"
     ${env} ${TOOL} emit ${P} --target cuda --arch sm_90a --kernel fused --explain -o ${OUT}/a)
file(READ ${OUT}/a/manifest.json m)
string(JSON key GET "${m}" tuning cache_key)
string(JSON src GET "${m}" tuning source)
if(NOT src STREQUAL "default")
  message(FATAL_ERROR "manifest tuning source ${src}")
endif()
# 2. A hand-written cache with an entry for that key: emit uses it, --explain and the manifest say so.
set(entry "\"${key}\": {\"tuning\": \"stages=2,qs=1\", \"time_us\": 40.0, \"default_us\": 42.0, \"date\": \"2026-12-03T08:00:00Z\"}")
file(WRITE ${OUT}/tuning.json "{\"schema_version\": 1, \"entries\": {${entry}}}\n")
step(cache 0 "tuning: stages=2,qs=1 \\(cache [^\n]*tuning\\.json; cache key ${key}\\).*2 stages \\(tuning\\).*Q in shared memory \\(tuning\\)"
     ${TOOL} emit ${P} --target cuda --arch sm_90a --kernel fused --explain --cache ${OUT}/tuning.json -o ${OUT}/b)
file(READ ${OUT}/b/manifest.json m)
string(JSON vals GET "${m}" tuning values)
string(JSON src GET "${m}" tuning source)
if(NOT vals STREQUAL "stages=2,qs=1" OR NOT src MATCHES "^cache .*tuning\\.json$")
  message(FATAL_ERROR "manifest tuning ${vals} from ${src}")
endif()
# The same file at the default location ($XDG_CACHE_HOME/splatc/tuning.json) is read without --cache.
file(COPY ${OUT}/tuning.json DESTINATION ${OUT}/xdg/splatc)
step(default_location 0 "tuning: stages=2,qs=1 \\(cache ${OUT}/xdg/splatc/tuning\\.json"
     ${env} ${TOOL} emit ${P} --target cuda --arch sm_90a --kernel fused --explain -o ${OUT}/c)
# Another arch is another key: the defaults. --no-cache: the defaults. --tune wins over the cache.
step(other_arch 0 "tuning: the defaults \\(default;"
     ${env} ${TOOL} emit ${P} --target cuda --arch sm_80 --kernel fused --explain -o ${OUT}/d)
step(no_cache 0 "tuning: the defaults \\(default;"
     ${env} ${TOOL} emit ${P} --target cuda --arch sm_90a --kernel fused --explain --no-cache -o ${OUT}/e)
step(tune_wins 0 "tuning: minb=3 \\(--tune;"
     ${env} ${TOOL} emit ${P} --target cuda --arch sm_90a --kernel fused --explain --tune minb=3 -o ${OUT}/f)
# Bad cache files. --cache FILE: a located error, exit 2 (emit, bench and tune, before any GPU work).
file(WRITE ${OUT}/bad.json "{\"schema_version\": 1,\n \"entries\": [}\n")
step(bad_emit 2 "bad\\.json:2:[0-9]+: the tuning cache is not valid JSON"
     ${TOOL} emit ${P} --arch sm_90a --cache ${OUT}/bad.json -o ${OUT}/g)
step(bad_bench 2 "bad\\.json:2:[0-9]+: the tuning cache is not valid JSON"
     ${TOOL} bench ${P} --cache ${OUT}/bad.json)
step(bad_tune 2 "bad\\.json:2:[0-9]+: the tuning cache is not valid JSON"
     ${TOOL} tune ${P} --cache ${OUT}/bad.json)
file(WRITE ${OUT}/schema.json "{\"schema_version\": 7, \"entries\": {}}")
step(bad_schema 2 "schema\\.json: schema_version: this splatc reads schema 1, the file has 7"
     ${TOOL} emit ${P} --cache ${OUT}/schema.json -o ${OUT}/h)
file(WRITE ${OUT}/entry.json "{\"schema_version\": 1, \"entries\": {\"${key}\": {\"tuning\": \"lazy=1\", \"time_us\": 1, \"default_us\": 1}}}")
step(bad_entry 2 "entry\\.json: entries\\.${key}\\.tuning: tuning: unknown key 'lazy'"
     ${TOOL} emit ${P} --cache ${OUT}/entry.json -o ${OUT}/i)
# The default location, bad: a warning, the cache ignored (tune would replace it).
file(WRITE ${OUT}/xdg/splatc/tuning.json "garbage")
step(bad_default 0 "tuning: the defaults \\(default;.*warning: ignoring the tuning cache: [^\n]*tuning\\.json:1:1: "
     ${env} ${TOOL} emit ${P} --target cuda --arch sm_90a --kernel fused --explain -o ${OUT}/j)
step(bad_default_tune 3 "warning: ignoring the tuning cache.*no usable GPU" ${env} ${TOOL} tune ${P} --budget 1)
# No file was half-written or replaced by the failed runs.
file(READ ${OUT}/bad.json b)
if(NOT b MATCHES "entries\": \\[}")
  message(FATAL_ERROR "bad.json changed: ${b}")
endif()
]=])
if(TARGET splatc)
  add_test(NAME e2e/splatc_tune_cache
           COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:splatc> -DOUT=${CMAKE_CURRENT_BINARY_DIR}/tune-cache
                   -P ${CMAKE_CURRENT_BINARY_DIR}/splatc_tune_cache.cmake
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(e2e/splatc_tune_cache PROPERTIES LABELS e2e)
endif()
