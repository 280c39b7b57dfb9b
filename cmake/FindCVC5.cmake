# FindCVC5: Debian's libcvc5-dev (1.0.3) ships no CMake config, so find the header and library
# ourselves. An upstream install with cvc5Config.cmake is preferred when present.
# Result: imported target cvc5::cvc5, CVC5_FOUND, CVC5_VERSION.
find_package(cvc5 CONFIG QUIET)
if(cvc5_FOUND AND TARGET cvc5::cvc5)
  set(CVC5_FOUND TRUE)
  set(CVC5_VERSION ${cvc5_VERSION})
  return()
endif()

find_path(CVC5_INCLUDE_DIR cvc5/cvc5.h)
find_library(CVC5_LIBRARY cvc5)
if(CVC5_INCLUDE_DIR AND EXISTS "${CVC5_INCLUDE_DIR}/cvc5/cvc5.h")
  # 1.0.x has no version macro in its headers; the CLI, when installed, tells us.
  find_program(CVC5_EXECUTABLE cvc5)
  if(CVC5_EXECUTABLE)
    execute_process(COMMAND ${CVC5_EXECUTABLE} --version OUTPUT_VARIABLE _cvc5_out ERROR_QUIET)
    string(REGEX MATCH "version ([0-9]+\\.[0-9]+\\.[0-9]+)" _m "${_cvc5_out}")
    set(CVC5_VERSION ${CMAKE_MATCH_1})
  endif()
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CVC5 REQUIRED_VARS CVC5_LIBRARY CVC5_INCLUDE_DIR VERSION_VAR CVC5_VERSION)
if(CVC5_FOUND AND NOT TARGET cvc5::cvc5)
  add_library(cvc5::cvc5 UNKNOWN IMPORTED)
  set_target_properties(cvc5::cvc5 PROPERTIES IMPORTED_LOCATION "${CVC5_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${CVC5_INCLUDE_DIR}")
endif()
mark_as_advanced(CVC5_INCLUDE_DIR CVC5_LIBRARY CVC5_EXECUTABLE)
