# FindCUDNN: cuDNN has no CMake config of its own. Looks for cudnn.h and libcudnn.so under
# /usr/local/cuda and the CUDA toolkit's directories (call find_package(CUDAToolkit) first).
#
#   find_package(CUDNN)            # or: find_package(CUDNN 9 REQUIRED)
#   target_link_libraries(t PRIVATE CUDNN::cudnn)
#
# Sets CUDNN_FOUND, CUDNN_VERSION (from cudnn_version.h, or cudnn.h for old releases),
# CUDNN_INCLUDE_DIR, CUDNN_LIBRARY. Hints: CUDNN_ROOT (variable or environment).
set(_cudnn_hints
  ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR} /usr/local/cuda)
set(_cudnn_include_hints ${CUDAToolkit_INCLUDE_DIRS})
set(_cudnn_lib_hints ${CUDAToolkit_LIBRARY_DIR})

find_path(CUDNN_INCLUDE_DIR cudnn.h
  HINTS ${_cudnn_include_hints} ${_cudnn_hints}
  PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY cudnn
  HINTS ${_cudnn_lib_hints} ${_cudnn_hints}
  PATH_SUFFIXES lib64 lib lib/x64)

set(CUDNN_VERSION "")
foreach(_cudnn_header cudnn_version.h cudnn.h)
  if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/${_cudnn_header}" AND NOT CUDNN_VERSION)
    file(STRINGS "${CUDNN_INCLUDE_DIR}/${_cudnn_header}" _cudnn_defines
         REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +[0-9]+")
    if(_cudnn_defines)
      string(REGEX REPLACE ".*CUDNN_MAJOR +([0-9]+).*" "\\1" _major "${_cudnn_defines}")
      string(REGEX REPLACE ".*CUDNN_MINOR +([0-9]+).*" "\\1" _minor "${_cudnn_defines}")
      string(REGEX REPLACE ".*CUDNN_PATCHLEVEL +([0-9]+).*" "\\1" _patch "${_cudnn_defines}")
      set(CUDNN_VERSION "${_major}.${_minor}.${_patch}")
    endif()
  endif()
endforeach()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN
  REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR
  VERSION_VAR CUDNN_VERSION)

if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES
    IMPORTED_LOCATION "${CUDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
  if(TARGET CUDA::cudart)
    set_property(TARGET CUDNN::cudnn APPEND PROPERTY INTERFACE_LINK_LIBRARIES CUDA::cudart)
  endif()
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
unset(_cudnn_hints)
unset(_cudnn_include_hints)
unset(_cudnn_lib_hints)
