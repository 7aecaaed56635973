# FindNCCL: NCCL has no CMake config of its own. Looks for nccl.h and libnccl.so under
# /usr/local/cuda and the CUDA toolkit's directories (call find_package(CUDAToolkit) first).
#
#   find_package(NCCL)
#   target_link_libraries(t PRIVATE NCCL::nccl)
#
# Sets NCCL_FOUND, NCCL_VERSION (from nccl.h), NCCL_INCLUDE_DIR, NCCL_LIBRARY.
# Hints: NCCL_ROOT (variable or environment).
set(_nccl_hints
  ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR} /usr/local/cuda)

find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_nccl_hints}
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl
  HINTS ${CUDAToolkit_LIBRARY_DIR} ${_nccl_hints}
  PATH_SUFFIXES lib64 lib)

set(NCCL_VERSION "")
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_defines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  if(_nccl_defines)
    string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*" "\\1" _major "${_nccl_defines}")
    string(REGEX REPLACE ".*NCCL_MINOR +([0-9]+).*" "\\1" _minor "${_nccl_defines}")
    string(REGEX REPLACE ".*NCCL_PATCH +([0-9]+).*" "\\1" _patch "${_nccl_defines}")
    set(NCCL_VERSION "${_major}.${_minor}.${_patch}")
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  # nccl.h includes cuda_runtime.h.
  if(TARGET CUDA::cudart)
    set_property(TARGET NCCL::nccl APPEND PROPERTY INTERFACE_LINK_LIBRARIES CUDA::cudart)
  endif()
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
unset(_nccl_hints)
