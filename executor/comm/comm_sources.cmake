# The process-crossing comm backends (included by executor/CMakeLists.txt). tcp and launch always;
# mpi_comm.cc only when CMake found MPI (launch.cc then turns an mpirun start into a clear Error).
target_sources(onnxtrain_executor PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/launch.cc
  ${CMAKE_CURRENT_LIST_DIR}/tcp_comm.cc
  ${CMAKE_CURRENT_LIST_DIR}/tcp_rendezvous.cc)
if(ONNXTRAIN_HAVE_MPI)
  target_sources(onnxtrain_executor PRIVATE ${CMAKE_CURRENT_LIST_DIR}/mpi_comm.cc)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/nccl_sources.cmake)
