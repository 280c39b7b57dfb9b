# Short runs of the fuzz targets in the normal build's test suite (label fuzz; docs/fuzzing.md).
# Each test runs one target of the fuzz build (scripts/fuzz --build-only makes it in build-fuzz/;
# .ci/run does) for TRSPLAT_FUZZ_SECONDS through `scripts/fuzz --no-build`: it fails on a finding
# and is skipped when the fuzz build is absent.
set(TRSPLAT_FUZZ_SECONDS 12 CACHE STRING "Seconds each fuzz target runs in ctest (label fuzz)")
foreach(_t fuzz_rules fuzz_pattern fuzz_acsr fuzz_verify)
  add_test(NAME fuzz/${_t} COMMAND ${PROJECT_SOURCE_DIR}/scripts/fuzz --no-build --fresh ${TRSPLAT_FUZZ_SECONDS} ${_t})
  set_tests_properties(fuzz/${_t} PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77 TIMEOUT 600)
endforeach()
