# ctest entries for the doctest cases of a test binary, labelled by kind (docs/testing.md).
#
# Each doctest TEST_CASE belongs to exactly one doctest test suite named after its kind (`unit`,
# `nvrtc`, `cpu-model`, `solver`, ...): a file opens its default kind with TEST_SUITE_BEGIN and a case
# of another kind says so with `* doctest::test_suite("KIND")`. After each build of the binary, the
# cases are listed suite by suite and each becomes one ctest entry PREFIX/NAME with the label KIND.
# A case in no suite or in a suite that is not a kind fails the build, so every test has a kind.
#
# Included from CMake:   trsplat_doctest_kinds(TARGET PREFIX KIND...)
# Run as a script:       cmake -DEXE=... -DPREFIX=... -DKINDS=a,b -DWORKDIR=... -DOUT=... -P this file

if(NOT CMAKE_SCRIPT_MODE_FILE)
  set(_trsplat_doctest_kinds_script ${CMAKE_CURRENT_LIST_FILE})
  function(trsplat_doctest_kinds target prefix)
    string(REPLACE ";" "," _kinds "${ARGN}")
    set(_tests ${CMAKE_CURRENT_BINARY_DIR}/${target}_kinds_tests.cmake)
    set(_include ${CMAKE_CURRENT_BINARY_DIR}/${target}_kinds_include.cmake)
    add_custom_command(TARGET ${target} POST_BUILD
      BYPRODUCTS ${_tests}
      COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:${target}> -DPREFIX=${prefix} -DKINDS=${_kinds}
              -DWORKDIR=${CMAKE_CURRENT_BINARY_DIR} -DOUT=${_tests} -P ${_trsplat_doctest_kinds_script}
      VERBATIM)
    file(WRITE ${_include}
      "if(EXISTS \"${_tests}\")\n  include(\"${_tests}\")\nelse()\n"
      "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_include})
  endfunction()
  return()
endif()

# Script mode. doctest's listings: banner lines start with "[doctest]" or "=====".
function(_list_cases out)
  execute_process(COMMAND ${EXE} ${ARGN} --list-test-cases OUTPUT_VARIABLE _o RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${EXE} --list-test-cases failed (${_rc})")
  endif()
  string(ASCII 31 _us)  # stands for ";" (a CMake list separator) until the script is written
  string(REPLACE ";" "${_us}" _o "${_o}")
  string(REPLACE "\n" ";" _lines "${_o}")
  set(_cases "")
  foreach(_l IN LISTS _lines)
    if(NOT _l STREQUAL "" AND NOT _l MATCHES "^\\[doctest\\] " AND NOT _l MATCHES "^=====")
      list(APPEND _cases "${_l}")
    endif()
  endforeach()
  set(${out} "${_cases}" PARENT_SCOPE)
endfunction()

string(REPLACE "," ";" KINDS "${KINDS}")
_list_cases(_all)
list(LENGTH _all _n_all)
set(_script "")
set(_n_kinds 0)
foreach(_kind IN LISTS KINDS)
  _list_cases(_cases --test-suite=${_kind})
  foreach(_case IN LISTS _cases)
    math(EXPR _n_kinds "${_n_kinds} + 1")
    # doctest's filters split at commas unless escaped; names are written as bracket arguments.
    string(ASCII 31 _us)
    string(REPLACE "${_us}" ";" _case "${_case}")
    string(REPLACE "\\" "\\\\" _filter "${_case}")
    string(REPLACE "," "\\," _filter "${_filter}")
    string(APPEND _script
      "add_test([==[${PREFIX}${_case}]==] \"${EXE}\" [==[--test-case=${_filter}]==])\n"
      "set_tests_properties([==[${PREFIX}${_case}]==] PROPERTIES LABELS ${_kind} WORKING_DIRECTORY \"${WORKDIR}\"\n"
      "  FAIL_REGULAR_EXPRESSION [==[test cases: 0 \\|]==])\n")
  endforeach()
endforeach()
if(NOT _n_kinds EQUAL _n_all)
  math(EXPR _missing "${_n_all} - ${_n_kinds}")
  message(FATAL_ERROR "${EXE}: ${_missing} test case(s) are in no test suite of a kind (${KINDS}); "
                      "see tests/doctest_kinds.cmake")
endif()
file(WRITE ${OUT} "${_script}")
