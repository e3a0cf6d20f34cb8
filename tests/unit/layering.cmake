# The layers' include rules (issue 12): dependencies run capi -> runtime -> {retrieval, core} ->
# kernels, never back, and kernels/ stays free of the engine (core/ sees only the neutral
# kernels/*.h headers, not kernels/cpu or kernels/cuda). Every #include "..." of every source
# file is checked. The pairs that break a rule today are listed below, each one the redesign's
# remaining work: a new break fails, and so does an entry that no longer occurs (the list only
# shrinks).
#   cmake -DSOURCE_DIR=<repo> -P layering.cmake
cmake_minimum_required(VERSION 3.20)

# "file -> included header" pairs that break a rule today: none since the backend registry (issue 12,
# item 4). A break that must land before its fix is listed here as "file -> header".
set(known_breaks)

# <layer folder> <regex of include paths it must not use>
set(rules
  "kernels|^(core|retrieval|runtime|capi|samples|eval)/"
  "core|^(retrieval|runtime|capi|samples|eval|kernels/cpu|kernels/cuda)/"
  "retrieval|^(runtime|capi|samples|eval|kernels/cpu|kernels/cuda)/"
  "runtime|^(capi|samples|eval|kernels/cpu|kernels/cuda)/"
  "capi|^(samples|eval|kernels/cpu|kernels/cuda)/"
  # The eval library sits beside the apps: the public headers (no folder) and
  # core/tokenizer/unicode.h only (eval/CMakeLists.txt says why); any other core header would not
  # link in the CLI.
  "eval|^(runtime|retrieval|capi|samples|kernels)/"
)

set(failures "")
set(seen_known "")
foreach(rule IN LISTS rules)
  string(REPLACE "|" ";" parts "${rule}")
  list(GET parts 0 layer)
  list(SUBLIST parts 1 -1 alternatives)
  string(JOIN "|" forbidden ${alternatives})
  file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR}
       ${SOURCE_DIR}/${layer}/*.h ${SOURCE_DIR}/${layer}/*.cpp ${SOURCE_DIR}/${layer}/*.c
       ${SOURCE_DIR}/${layer}/*.cu ${SOURCE_DIR}/${layer}/*.cuh)
  foreach(f IN LISTS files)
    file(STRINGS ${SOURCE_DIR}/${f} includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\".*" "\\1" header "${line}")
      if(header MATCHES "${forbidden}")
        set(pair "${f} -> ${header}")
        if(pair IN_LIST known_breaks)
          list(APPEND seen_known "${pair}")
        else()
          list(APPEND failures "${pair}: ${layer}/ must not include ${header}")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

foreach(pair IN LISTS known_breaks)
  if(NOT pair IN_LIST seen_known)
    list(APPEND failures "'${pair}' is gone: remove it from known_breaks in tests/unit/layering.cmake")
  endif()
endforeach()

if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "layering rules broken:\n  ${text}")
endif()
list(LENGTH known_breaks n)
message(STATUS "layering: every include follows the rules (${n} known breaks left)")
