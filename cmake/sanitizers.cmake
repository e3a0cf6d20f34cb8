# CBL_SANITIZE=address,undefined or thread: instrument everything we build (mimalloc is turned off
# in these builds because it hides the heap from ASan).
if(CBL_SANITIZE)
  string(REPLACE "," ";" _cbl_san_list "${CBL_SANITIZE}")
  set(_cbl_san_flags "")
  foreach(_s ${_cbl_san_list})
    list(APPEND _cbl_san_flags "-fsanitize=${_s}")
  endforeach()
  list(APPEND _cbl_san_flags -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_cbl_san_flags})
  add_link_options(${_cbl_san_flags})
endif()
