# The libraries behind the document extractors (retrieval/extract/), found with pkg-config.
# libxml2 (HTML, and the XML inside DOCX/ODT) and libmagic (content sniffing) are required.
# poppler-cpp (PDF) and libzip (DOCX, ODT) are optional: without one, its extractor skips such
# files with "unsupported file type (built without poppler)" and the rest of the library works.
# scripts/install-deps.sh installs all four (Debian: libpoppler-cpp-dev libzip-dev libxml2-dev
# libmagic-dev).
find_package(PkgConfig REQUIRED)
pkg_check_modules(CBL_LIBXML2 REQUIRED IMPORTED_TARGET libxml-2.0)
pkg_check_modules(CBL_LIBMAGIC REQUIRED IMPORTED_TARGET libmagic)
pkg_check_modules(CBL_POPPLER IMPORTED_TARGET poppler-cpp)
pkg_check_modules(CBL_LIBZIP IMPORTED_TARGET libzip)

target_link_libraries(cbl_objects PUBLIC PkgConfig::CBL_LIBXML2 PkgConfig::CBL_LIBMAGIC)
if(CBL_POPPLER_FOUND)
  target_link_libraries(cbl_objects PUBLIC PkgConfig::CBL_POPPLER)
  set(CBL_HAVE_POPPLER 1)
else()
  message(STATUS "poppler-cpp not found: PDF files will be skipped (install libpoppler-cpp-dev)")
  set(CBL_HAVE_POPPLER 0)
endif()
if(CBL_LIBZIP_FOUND)
  target_link_libraries(cbl_objects PUBLIC PkgConfig::CBL_LIBZIP)
  set(CBL_HAVE_LIBZIP 1)
else()
  message(STATUS "libzip not found: DOCX and ODT files will be skipped (install libzip-dev)")
  set(CBL_HAVE_LIBZIP 0)
endif()
# PUBLIC so tests can tell which extractors exist (and build their DOCX/ODT fixtures with libzip).
target_compile_definitions(cbl_objects PUBLIC CBL_HAVE_POPPLER=${CBL_HAVE_POPPLER}
                           CBL_HAVE_LIBZIP=${CBL_HAVE_LIBZIP})
