# The NCCL comm backend (included by comm_sources.cmake). nccl_comm.cc is always compiled: with NCCL
# (ONNXTRAIN_HAVE_NCCL) it is the backend, without it every entry point throws "NCCL support not
# compiled in". executor/CMakeLists.txt already links NCCL::nccl when NCCL is found; cudart is linked
# here as well because nccl_comm.cc calls the CUDA runtime itself (device checks).
target_sources(onnxtrain_executor PRIVATE ${CMAKE_CURRENT_LIST_DIR}/nccl_comm.cc)
if(ONNXTRAIN_HAVE_NCCL)
  target_link_libraries(onnxtrain_executor PRIVATE NCCL::nccl CUDA::cudart)
endif()
