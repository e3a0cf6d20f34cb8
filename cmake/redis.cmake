# hiredis for the shared chunk-KV tier on Redis (core/kvstore/kv-remote-redis.cpp), found with
# pkg-config. CBL_REDIS: AUTO (default) builds the tier when hiredis is found, ON requires it, OFF
# leaves it out; without it a kv_remote URL is CBL_UNSUPPORTED naming this option. Debian:
# libhiredis-dev (scripts/install-deps.sh); the tests also need redis-server.
set(CBL_REDIS AUTO CACHE STRING "Shared chunk KV on Redis through hiredis: AUTO, ON or OFF")
set_property(CACHE CBL_REDIS PROPERTY STRINGS AUTO ON OFF)
set(CBL_HAVE_HIREDIS 0)
if(NOT CBL_REDIS STREQUAL "OFF")
  pkg_check_modules(CBL_HIREDIS IMPORTED_TARGET hiredis)
  if(CBL_HIREDIS_FOUND)
    target_link_libraries(cbl_objects PUBLIC PkgConfig::CBL_HIREDIS)
    set(CBL_HAVE_HIREDIS 1)
  elseif(CBL_REDIS STREQUAL "ON")
    message(FATAL_ERROR "CBL_REDIS=ON but hiredis was not found (install libhiredis-dev)")
  else()
    message(STATUS "hiredis not found: no shared KV tier on Redis (install libhiredis-dev)")
  endif()
endif()
# PUBLIC so tests know whether the tier exists.
target_compile_definitions(cbl_objects PUBLIC CBL_HAVE_HIREDIS=${CBL_HAVE_HIREDIS})
