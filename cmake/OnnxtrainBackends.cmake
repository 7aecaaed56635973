# Optional compute and communication backends. Included once from the top-level CMakeLists.txt
# (directory scope: enable_language must run there). Sets, for the rest of the build:
#   ONNXTRAIN_HAVE_CUDA, ONNXTRAIN_HAVE_CUDNN, ONNXTRAIN_HAVE_NCCL, ONNXTRAIN_HAVE_MPI,
#   ONNXTRAIN_HAVE_BENCHMARK (ON/OFF) and ONNXTRAIN_*_REASON (why a backend is off).
#
#   cmake -S . -B build -DONNXTRAIN_CUDA=AUTO|ON|OFF -DONNXTRAIN_MPI=AUTO|ON|OFF

# Turns a user's AUTO|ON|OFF (or any CMake boolean) into AUTO, ON or OFF.
function(onnxtrain_tristate var)
  string(TOUPPER "${${var}}" _value)
  if(_value STREQUAL "AUTO")
    set(_mode AUTO)
  elseif(${var})
    set(_mode ON)
  else()
    set(_mode OFF)
  endif()
  set(${var}_MODE ${_mode} PARENT_SCOPE)
endfunction()

# --- CUDA (+ cuDNN, cuBLAS, NCCL) -------------------------------------------------------------------
set(ONNXTRAIN_CUDA AUTO CACHE STRING "Compile the CUDA backend: AUTO (when nvcc is found), ON (required), OFF")
set_property(CACHE ONNXTRAIN_CUDA PROPERTY STRINGS AUTO ON OFF)
onnxtrain_tristate(ONNXTRAIN_CUDA)

set(ONNXTRAIN_HAVE_CUDA OFF)
set(ONNXTRAIN_HAVE_CUDNN OFF)
set(ONNXTRAIN_HAVE_NCCL OFF)
set(ONNXTRAIN_CUDA_REASON "")
if(ONNXTRAIN_CUDA_MODE STREQUAL "OFF")
  set(ONNXTRAIN_CUDA_REASON "disabled by ONNXTRAIN_CUDA=OFF")
else()
  # nvcc is often not on PATH; the toolkit's usual home is /usr/local/cuda.
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(ONNXTRAIN_NVCC nvcc HINTS ENV CUDA_PATH ENV CUDA_HOME PATHS /usr/local/cuda/bin PATH_SUFFIXES bin)
    mark_as_advanced(ONNXTRAIN_NVCC)
    if(ONNXTRAIN_NVCC)
      set(ENV{CUDACXX} "${ONNXTRAIN_NVCC}")
    endif()
  endif()
  # CUDA 13 dropped the architectures below 7.5; 90 = H100/H200.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures to compile for")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    # CMake 3.25 knows nvcc's dialect flags only up to C++17; nvcc >= 12 with g++ >= 10 takes -std=c++20.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # Shared cudart: one runtime per process, shared with cuDNN, cuBLAS and NCCL.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(ONNXTRAIN_HAVE_CUDA ON)
      find_package(CUDNN)
      set(ONNXTRAIN_HAVE_CUDNN ${CUDNN_FOUND})
      find_package(NCCL)
      set(ONNXTRAIN_HAVE_NCCL ${NCCL_FOUND})
    else()
      set(ONNXTRAIN_CUDA_REASON "nvcc found but find_package(CUDAToolkit) failed")
    endif()
  else()
    set(ONNXTRAIN_CUDA_REASON "no CUDA compiler (nvcc) found")
  endif()
  if(ONNXTRAIN_CUDA_MODE STREQUAL "ON" AND NOT ONNXTRAIN_HAVE_CUDA)
    message(FATAL_ERROR "ONNXTRAIN_CUDA=ON but ${ONNXTRAIN_CUDA_REASON}. Install the CUDA toolkit under "
                        "/usr/local/cuda, set CUDACXX, or configure with -DONNXTRAIN_CUDA=AUTO or OFF.")
  endif()
endif()
if(ONNXTRAIN_HAVE_CUDA AND NOT ONNXTRAIN_HAVE_CUDNN)
  message(WARNING "CUDA is on but cuDNN was not found (set CUDNN_ROOT): the CUDA backend will lack cuDNN kernels.")
endif()

# --- MPI ------------------------------------------------------------------------------------------------
set(ONNXTRAIN_MPI AUTO CACHE STRING "Compile the MPI comm backend: AUTO (when MPI is found), ON (required), OFF")
set_property(CACHE ONNXTRAIN_MPI PROPERTY STRINGS AUTO ON OFF)
onnxtrain_tristate(ONNXTRAIN_MPI)

set(ONNXTRAIN_HAVE_MPI OFF)
set(ONNXTRAIN_MPI_REASON "")
if(ONNXTRAIN_MPI_MODE STREQUAL "OFF")
  set(ONNXTRAIN_MPI_REASON "disabled by ONNXTRAIN_MPI=OFF")
else()
  # The C API only: no deprecated MPI C++ bindings.
  set(MPI_CXX_SKIP_MPICXX ON CACHE BOOL "Skip the MPI C++ bindings")
  if(ONNXTRAIN_MPI_MODE STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS CXX)
  else()
    find_package(MPI COMPONENTS CXX)
  endif()
  if(MPI_CXX_FOUND)
    set(ONNXTRAIN_HAVE_MPI ON)
  else()
    set(ONNXTRAIN_MPI_REASON "MPI not found (install libopenmpi-dev)")
  endif()
endif()

# --- Google Benchmark (optional; the bench targets need it) -------------------------------------------
find_package(benchmark QUIET)
set(ONNXTRAIN_HAVE_BENCHMARK ${benchmark_FOUND})
