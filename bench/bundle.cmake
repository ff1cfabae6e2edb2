# SPDX-License-Identifier: BSL-1.0
# Makes a benchmark binary's folder self-contained: copies every shared library the binary needs,
# directly or through another copied library, beside it (the binary finds them through its
# DT_RPATH $ORIGIN), except glibc's own, which the target machine provides. Fails when a needed
# library is in none of the search folders, so a folder that would not start elsewhere is a
# build error here rather than a surprise on the board.
#
#   cmake -DBINARY=<file> -DOBJDUMP=<objdump for the target> -DSEARCH=<dir>|<dir>...
#         [-DEXTRA=<file>|<file>...] -P bundle.cmake
#
# EXTRA: libraries that are loaded at run time by name (dlopen) rather than linked, copied too.
cmake_minimum_required(VERSION 3.21)

foreach(var BINARY OBJDUMP SEARCH)
  if(NOT ${var})
    message(FATAL_ERROR "bundle.cmake: ${var} not set")
  endif()
endforeach()
string(REPLACE "|" ";" search "${SEARCH}")
string(REPLACE "|" ";" extra "${EXTRA}")
get_filename_component(dest "${BINARY}" DIRECTORY)
get_filename_component(binary_name "${BINARY}" NAME)

# glibc's libraries and loaders: the target machine's own.
set(system_re
  "^(libc|libm|libmvec|libdl|libpthread|librt|libresolv|libutil|libanl)\\.so\\.[0-9]+$|^ld-linux[-a-z0-9_.]*\\.so\\.[0-9]+$")

# dynamic_entries(<file> <tag> <out-var>): the values of one dynamic-section tag (NEEDED, SONAME).
function(dynamic_entries file tag out)
  execute_process(COMMAND "${OBJDUMP}" -p "${file}" OUTPUT_VARIABLE dump RESULT_VARIABLE rc
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "bundle.cmake: ${OBJDUMP} -p ${file} failed: ${err}")
  endif()
  string(REGEX MATCHALL "\n  ${tag} +[^\n]+" lines "${dump}")
  set(values "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "\n  ${tag} +" "" value "${line}")
    string(STRIP "${value}" value)
    list(APPEND values "${value}")
  endforeach()
  set(${out} "${values}" PARENT_SCOPE)
endfunction()

# place(<source> <name>): copies source to dest/name unless identical; the copy goes through a
# private temporary name, since every benchmark target bundles the same libraries in parallel.
function(place source name)
  get_filename_component(real "${source}" REALPATH)
  set(tmp "${dest}/.${name}.${binary_name}.tmp")
  file(COPY_FILE "${real}" "${tmp}")
  file(RENAME "${tmp}" "${dest}/${name}")
endfunction()

set(pending "${BINARY}")
set(seen "")
foreach(lib IN LISTS extra)
  if(EXISTS "${lib}")
    dynamic_entries("${lib}" SONAME soname)
    if(NOT soname)
      get_filename_component(soname "${lib}" NAME)
    endif()
    if(NOT soname IN_LIST seen)
      place("${lib}" "${soname}")
      list(APPEND seen "${soname}")
      list(APPEND pending "${dest}/${soname}")
    endif()
  endif()
endforeach()

while(pending)
  list(POP_FRONT pending file)
  dynamic_entries("${file}" NEEDED needed)
  foreach(name IN LISTS needed)
    if(name MATCHES "${system_re}" OR name IN_LIST seen)
      continue()
    endif()
    set(found "")
    foreach(dir IN LISTS search)
      if(EXISTS "${dir}/${name}")
        set(found "${dir}/${name}")
        break()
      endif()
    endforeach()
    if(NOT found)
      message(FATAL_ERROR "bundle.cmake: ${file} needs ${name}, which is in none of: ${search}")
    endif()
    place("${found}" "${name}")
    list(APPEND seen "${name}")
    list(APPEND pending "${dest}/${name}")
  endforeach()
endwhile()
