# No source file in core/ or runtime/ over 600 lines (issue 12): a file that grows past that is
# split along what it does (docs/ARCHITECTURE.md, 'Source layout'). Generated tables count too:
# their generator writes one file per table group.
#   cmake -DSOURCE_DIR=<repo> -P file-size.cmake
cmake_minimum_required(VERSION 3.20)

set(limit 600)
set(failures "")
foreach(layer core runtime)
  file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR}
       ${SOURCE_DIR}/${layer}/*.h ${SOURCE_DIR}/${layer}/*.cpp ${SOURCE_DIR}/${layer}/*.c
       ${SOURCE_DIR}/${layer}/*.cu ${SOURCE_DIR}/${layer}/*.cuh)
  foreach(f IN LISTS files)
    # file(STRINGS) drops empty lines, so count newlines instead.
    file(READ ${SOURCE_DIR}/${f} text)
    string(REGEX REPLACE "[^\n]" "" newlines "${text}")
    string(LENGTH "${newlines}" n)
    if(n GREATER limit)
      list(APPEND failures "${f}: ${n} lines")
    endif()
  endforeach()
endforeach()

if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "files over ${limit} lines (split them by responsibility):\n  ${text}")
endif()
message(STATUS "file size: every core/ and runtime/ source file is at most ${limit} lines")
