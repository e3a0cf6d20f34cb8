# Tests cmake/model-registry.cmake, which compiles core/model/model-registry.tsv into the library:
# the real registry and a valid one with awkward text (quotes, backslashes, ';' and '[' in a
# description, blank and comment lines, runs of tabs) generate what core/model/model-registry.cpp
# expects; every malformed registry stops with its line number and the reason.
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch folder> -P model-registry-generator.cmake
cmake_minimum_required(VERSION 3.20)
set(gen ${SOURCE_DIR}/cmake/model-registry.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

set(sha_a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
set(sha_b "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
set(model_ok "model\ttiny\ttiny.gguf\t1234\t${sha_a}\tMIT\tA \"tiny\" model\\n; [x] kept")
set(part_ok "part\ttiny\ttiny-pkg==1.0.post1\ttiny_pkg/tiny.gguf\t${sha_b}")

function(fail msg)
  message("FAIL ${msg}")
  set_property(GLOBAL APPEND PROPERTY cbl_failures "${msg}")
endfunction()

# run(<case> <expect: ok|fail> <text to find in the generated file or the error> <tsv text>)
function(run case expect needle text)
  set(tsv ${WORK_DIR}/${case}.tsv)
  set(out ${WORK_DIR}/${case}.inc)
  file(WRITE ${tsv} "${text}")
  execute_process(COMMAND ${CMAKE_COMMAND} -DTSV=${tsv} -DOUT=${out} -P ${gen}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(expect STREQUAL "ok")
    if(NOT rc EQUAL 0)
      fail("${case}: generation failed: ${stderr}")
      return()
    endif()
    file(READ ${out} got)
  else()
    if(rc EQUAL 0)
      fail("${case}: a malformed registry was accepted")
      return()
    endif()
    # CMake wraps error messages at spaces: compare with runs of white space folded.
    string(REGEX REPLACE "[ \n]+" " " got "${stderr}")
  endif()
  string(FIND "${got}" "${needle}" at)
  if(at EQUAL -1)
    fail("${case}: '${needle}' not in:\n${got}")
  endif()
endfunction()

# The real registry generates an entry per model, the default model included.
file(READ ${SOURCE_DIR}/core/model/model-registry.tsv real_text)
run(real ok "{\"qwen2.5-coder-1.5b\", \"Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf\", UINT64_C(1117320768)"
    "${real_text}")

# Awkward but valid text: C escapes in the output, nothing split at ';' or '['.
run(escapes ok
    "{\"tiny\", \"tiny.gguf\", UINT64_C(1234), \"${sha_a}\", \"MIT\",\n     \"A \\\"tiny\\\" model\\\\n; [x] kept\"},"
    "# comment\n\n${model_ok}\n  \n${part_ok}\t\n")
run(tabs ok "UINT64_C(1234)"
    "model\t\ttiny\ttiny.gguf\t\t\t1234\t${sha_a}\tMIT\tdesc\npart\ttiny\t\tp==1\tm\t${sha_b}")

# Malformed registries: each names the line and the problem.
run(empty fail "no model lines" "# nothing\n")
run(no_parts fail "model 'tiny' has no part lines" "${model_ok}\n")
run(part_first fail "part_first.tsv:1: part of 'tiny', which no model line above declares"
    "${part_ok}\n${model_ok}\n")
run(duplicate fail "duplicate.tsv:3: model 'tiny' is listed twice"
    "${model_ok}\n${part_ok}\n${model_ok}\n")
run(few_fields fail "few_fields.tsv:1: not a tab-separated 'model' line"
    "model\ttiny\ttiny.gguf\t1234\t${sha_a}\tMIT\n")
run(spaces fail "spaces.tsv:1: not a tab-separated"
    "model tiny tiny.gguf 1234 ${sha_a} MIT desc\n")
run(unknown_kind fail "unknown_kind.tsv:2: not a tab-separated" "${model_ok}\nmodle\tx\n")
run(bad_name fail "model name 'Tiny' must be lowercase"
    "model\tTiny\ttiny.gguf\t1\t${sha_a}\tMIT\td\n")
run(path_file fail "file '../tiny.gguf' must be a plain file name"
    "model\ttiny\t../tiny.gguf\t1\t${sha_a}\tMIT\td\n")
run(zero_size fail "size '0' must be a positive number of bytes"
    "model\ttiny\ttiny.gguf\t0\t${sha_a}\tMIT\td\n")
run(huge_size fail "size '12345678901234567890' must be a positive number"
    "model\ttiny\ttiny.gguf\t12345678901234567890\t${sha_a}\tMIT\td\n")
run(short_sha fail "sha256 'abc' is not 64 lowercase hex digits"
    "model\ttiny\ttiny.gguf\t1\tabc\tMIT\td\n")
string(TOUPPER "${sha_a}" sha_upper)
run(upper_sha fail "is not 64 lowercase hex digits"
    "model\ttiny\ttiny.gguf\t1\t${sha_upper}\tMIT\td\n")
run(unpinned fail "package 'tiny-pkg' must be pinned as name==version"
    "${model_ok}\npart\ttiny\ttiny-pkg\tm\t${sha_b}\n")
run(wheel_sha fail "wheel sha256 'xyz' is not 64"
    "${model_ok}\npart\ttiny\tp==1\tm\txyz\n")

get_property(failures GLOBAL PROPERTY cbl_failures)
if(failures)
  message(FATAL_ERROR "model registry generator: some cases failed (see FAIL lines above)")
endif()
message("model registry generator: all cases passed")
