// NcclCommunicator: NCCL over device buffers, bootstrapped over a host Communicator. Without NCCL
// (ONNXTRAIN_HAVE_NCCL=0) the same interface throws "NCCL support not compiled in".
#include "executor/comm/nccl_comm.h"

#include "graph/error.h"

#if ONNXTRAIN_HAVE_NCCL

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <span>

namespace onnxtrain {

struct NcclCommunicator::State {
  // Atomic: abort() may run on another thread while the owner is blocked in a stream wait.
  std::atomic<ncclComm_t> comm{nullptr};
  std::atomic<bool> aborted{false};
  int rank = 0, size = 1, device = 0;

  ~State() {
    // A destructor reports nothing. After an asynchronous failure (a peer died mid-collective) NCCL's
    // contract is to abort the communicator: ncclCommDestroy would wait for operations that never end.
    if (ncclComm_t c = comm.exchange(nullptr)) {
      ncclResult_t async = ncclSuccess;
      const bool failed =
          ncclCommGetAsyncError(c, &async) != ncclSuccess || (async != ncclSuccess && async != ncclInProgress);
      if (failed) {
        ncclCommAbort(c);
      } else {
        ncclCommDestroy(c);
      }
    }
  }
  std::string describe() const {
    return "rank " + std::to_string(rank) + " of " + std::to_string(size) + " on cuda:" + std::to_string(device);
  }
  ncclComm_t live(const char* op) const {
    ncclComm_t c = comm.load();
    if (c == nullptr) throw Error(std::string("NCCL ") + op + " on an aborted communicator (" + describe() + ")");
    return c;
  }
};

namespace {

[[noreturn]] void throw_nccl(const char* call, ncclResult_t result, ncclComm_t comm, const std::string& who) {
  std::string message = std::string("NCCL call failed: ") + call + ": " + ncclGetErrorString(result);
  // ncclGetLastError carries the detail (which peer, which transport, which CUDA error).
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') message += " (NCCL: " + std::string(last) + ")";
  if (!who.empty()) message += "; " + who;
  throw Error(message);
}

#define ONNXTRAIN_NCCL_CHECK(call, comm, who)                                                                         \
  do {                                                                                                                \
    const ncclResult_t onnxtrain_nccl_result_ = (call);                                                               \
    if (onnxtrain_nccl_result_ != ncclSuccess) ::onnxtrain::throw_nccl(#call, onnxtrain_nccl_result_, (comm), (who)); \
  } while (0)

std::string cuda_reason(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

// Makes cuda:`device` current for this scope (NCCL initialises on the current device) and restores the
// caller's device afterwards, so constructing a communicator does not move the calling thread.
class CurrentDevice {
 public:
  CurrentDevice() = default;
  ~CurrentDevice() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

  // "" when cuda:`device` exists and is now current, else why not.
  std::string use(int device) {
    if (device < 0) return "the CUDA device index must be >= 0, got " + std::to_string(device);
    int count = 0;
    if (const cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
      cudaGetLastError();  // clear it, so that the next checked CUDA call does not report it again
      return "no CUDA device is visible (cudaGetDeviceCount: " + cuda_reason(err) + ")";
    }
    if (count == 0) return "no CUDA device is visible (cudaGetDeviceCount returned 0)";
    if (device >= count) {
      return "cuda:" + std::to_string(device) + " requested but only " + std::to_string(count) +
             " CUDA device(s) are visible (CUDA_VISIBLE_DEVICES restricts them)";
    }
    int previous = -1;
    if (const cudaError_t err = cudaGetDevice(&previous); err != cudaSuccess) {
      cudaGetLastError();
      return "cudaGetDevice failed: " + cuda_reason(err);
    }
    if (const cudaError_t err = cudaSetDevice(device); err != cudaSuccess) {
      cudaGetLastError();
      return "cudaSetDevice(" + std::to_string(device) + ") failed: " + cuda_reason(err);
    }
    if (previous_ < 0) previous_ = previous;
    return "";
  }

 private:
  int previous_ = -1;
};

std::string join_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

// The communicator of `state` for operation `op`, after checking that no earlier operation failed
// asynchronously: enqueueing onto a communicator whose peer died would only hang at the next wait,
// while the failure is known on the host (ncclCommGetAsyncError reads a flag, no synchronisation).
ncclComm_t live_checked(const NcclCommunicator::State& state, const char* op) {
  ncclComm_t comm = state.live(op);
  ncclResult_t async = ncclSuccess;
  ONNXTRAIN_NCCL_CHECK(ncclCommGetAsyncError(comm, &async), comm, state.describe());
  if (async != ncclSuccess && async != ncclInProgress) {
    throw_nccl((std::string("an earlier NCCL operation (reported before ") + op + ")").c_str(), async, comm,
               state.describe() + "; abort() this communicator");
  }
  return comm;
}

void check_peer(const NcclCommunicator::State& state, int peer, const char* role) {
  if (peer < 0 || peer >= state.size) {
    throw Error(std::string("NCCL ") + role + " " + std::to_string(peer) + " is outside ranks 0.." +
                std::to_string(state.size - 1) + " (" + state.describe() + ")");
  }
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<State> state) : state_(std::move(state)) {}

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int device) : state_(std::make_unique<State>()) {
  State& st = *state_;
  st.rank = bootstrap.rank();
  st.size = bootstrap.size();
  st.device = device;
  const std::string context = "cannot create the NCCL communicator (" + st.describe() + ")";

  // Every rank learns which ranks have no usable device before anyone enters NCCL's own (blocking)
  // initialisation, so a missing GPU fails every rank at once instead of leaving the others waiting.
  CurrentDevice current;
  const std::string problem = current.use(device);
  std::vector<float> missing(static_cast<std::size_t>(st.size), 0.0f);
  if (!problem.empty()) missing[static_cast<std::size_t>(st.rank)] = 1.0f;
  bootstrap.all_reduce_sum(missing, "NCCL initialisation: which ranks have a CUDA device");
  std::vector<int> bad;
  for (int r = 0; r < st.size; ++r) {
    if (missing[static_cast<std::size_t>(r)] != 0.0f) bad.push_back(r);
  }
  if (!bad.empty()) {
    if (st.size == 1) throw Error(context + ": " + problem);
    const std::string others = "rank(s) without a usable CUDA device: " + join_ranks(bad);
    throw Error(context + ": " + (problem.empty() ? others + " (see their errors)" : problem + "; " + others));
  }

  // Rank 0's unique id (or its failure) travels to every rank over the host communicator.
  std::array<std::byte, sizeof(int32_t) + sizeof(ncclUniqueId)> message{};
  ncclUniqueId id{};
  std::string id_error;
  if (st.rank == 0) {
    int32_t status = 0;
    if (const ncclResult_t result = ncclGetUniqueId(&id); result != ncclSuccess) {
      status = 1;
      id_error = std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(result);
      if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0') {
        id_error += " (NCCL: " + std::string(last) + ")";
      }
    }
    std::memcpy(message.data(), &status, sizeof status);
    std::memcpy(message.data() + sizeof status, &id, sizeof id);
  }
  bootstrap.broadcast(std::span<std::byte>(message), /*root=*/0, "NCCL unique id");
  int32_t status = 0;
  std::memcpy(&status, message.data(), sizeof status);
  std::memcpy(&id, message.data() + sizeof status, sizeof id);
  if (status != 0) {
    throw Error(context + ": " + (st.rank == 0 ? id_error : "rank 0 could not create the NCCL unique id"));
  }

  ncclComm_t comm = nullptr;
  ONNXTRAIN_NCCL_CHECK(ncclCommInitRank(&comm, st.size, id, st.rank), nullptr, context);
  st.comm.store(comm);
}

std::vector<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create_local(const std::vector<int>& devices) {
  if (devices.empty()) throw Error("NCCL local communicators: the device list is empty");
  std::vector<int> sorted = devices;
  std::sort(sorted.begin(), sorted.end());
  if (auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end()) {
    throw Error("NCCL local communicators: cuda:" + std::to_string(*dup) +
                " is listed twice (NCCL needs one device per rank)");
  }
  const int n = static_cast<int>(devices.size());
  std::string names;
  for (int d : devices) names += (names.empty() ? "cuda:" : ", cuda:") + std::to_string(d);
  const std::string context = "cannot create the NCCL communicators of " + names;
  {
    CurrentDevice current;
    for (int r = 0; r < n; ++r) {
      if (const std::string problem = current.use(devices[static_cast<std::size_t>(r)]); !problem.empty()) {
        throw Error(context + ": rank " + std::to_string(r) + ": " + problem);
      }
    }
  }

  // States first: once ncclCommInitAll returns, every communicator has an owner that destroys it.
  std::vector<std::unique_ptr<State>> states;
  for (int r = 0; r < n; ++r) {
    states.push_back(std::make_unique<State>());
    states.back()->rank = r;
    states.back()->size = n;
    states.back()->device = devices[static_cast<std::size_t>(r)];
  }
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(n), nullptr);
  {
    CurrentDevice current;  // ncclCommInitAll switches devices itself; restore the caller's
    current.use(devices[0]);
    ONNXTRAIN_NCCL_CHECK(ncclCommInitAll(comms.data(), n, devices.data()), nullptr, context);
  }
  for (int r = 0; r < n; ++r) states[static_cast<std::size_t>(r)]->comm.store(comms[static_cast<std::size_t>(r)]);

  std::vector<std::unique_ptr<NcclCommunicator>> result;
  for (auto& state : states)
    result.push_back(std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(state))));
  return result;
}

NcclCommunicator::~NcclCommunicator() = default;

int NcclCommunicator::rank() const { return state_->rank; }
int NcclCommunicator::size() const { return state_->size; }
int NcclCommunicator::device() const { return state_->device; }
std::string NcclCommunicator::describe() const { return state_->describe(); }
bool NcclCommunicator::aborted() const { return state_->aborted.load(); }

void NcclCommunicator::check_async_error() const { live_checked(*state_, "a wait for pending transfers"); }

void NcclCommunicator::all_reduce_sum(float* data, std::size_t count, void* stream) {
  ncclComm_t comm = live_checked(*state_, "all_reduce_sum");
  ONNXTRAIN_NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(stream)),
                       comm, state_->describe());
}

void NcclCommunicator::broadcast(void* data, std::size_t bytes, int root, void* stream) {
  check_peer(*state_, root, "broadcast root");
  ncclComm_t comm = live_checked(*state_, "broadcast");
  ONNXTRAIN_NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclInt8, root, comm, static_cast<cudaStream_t>(stream)), comm,
                       state_->describe());
}

void NcclCommunicator::send(int peer, const void* data, std::size_t bytes, void* stream) {
  check_peer(*state_, peer, "send to rank");
  ncclComm_t comm = live_checked(*state_, "send");
  ONNXTRAIN_NCCL_CHECK(
      ncclSend(data, bytes, ncclInt8, peer, comm, static_cast<cudaStream_t>(stream)), comm,
      state_->describe() + ", sending " + std::to_string(bytes) + " bytes to rank " + std::to_string(peer));
}

void NcclCommunicator::recv(int peer, void* data, std::size_t bytes, void* stream) {
  check_peer(*state_, peer, "recv from rank");
  ncclComm_t comm = live_checked(*state_, "recv");
  ONNXTRAIN_NCCL_CHECK(
      ncclRecv(data, bytes, ncclInt8, peer, comm, static_cast<cudaStream_t>(stream)), comm,
      state_->describe() + ", receiving " + std::to_string(bytes) + " bytes from rank " + std::to_string(peer));
}

void NcclCommunicator::group_start() { ONNXTRAIN_NCCL_CHECK(ncclGroupStart(), nullptr, ""); }

void NcclCommunicator::group_end() {
  ONNXTRAIN_NCCL_CHECK(ncclGroupEnd(), nullptr, "launching the operations of an NCCL group");
}

void NcclCommunicator::abort() noexcept {
  state_->aborted.store(true);
  if (ncclComm_t c = state_->comm.exchange(nullptr)) ncclCommAbort(c);  // aborting: its result changes nothing
}

NcclGroup::~NcclGroup() noexcept(false) {
  if (std::uncaught_exceptions() > uncaught_) {
    ncclGroupEnd();  // unwinding: the first error is the one to report
    return;
  }
  NcclCommunicator::group_end();
}

}  // namespace onnxtrain

#else  // !ONNXTRAIN_HAVE_NCCL

namespace onnxtrain {
namespace {
[[noreturn]] void not_compiled() {
  throw Error(
      "NCCL support not compiled in: rebuild with the CUDA toolkit and NCCL installed (-DONNXTRAIN_CUDA=ON; "
      "NCCL is found under /usr/local/cuda or NCCL_ROOT)");
}
}  // namespace

struct NcclCommunicator::State {};

NcclCommunicator::NcclCommunicator(std::unique_ptr<State> state) : state_(std::move(state)) {}
NcclCommunicator::NcclCommunicator(Communicator&, int) { not_compiled(); }
std::vector<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create_local(const std::vector<int>&) {
  not_compiled();
}
NcclCommunicator::~NcclCommunicator() = default;
int NcclCommunicator::rank() const { not_compiled(); }
int NcclCommunicator::size() const { not_compiled(); }
int NcclCommunicator::device() const { not_compiled(); }
std::string NcclCommunicator::describe() const { not_compiled(); }
bool NcclCommunicator::aborted() const { not_compiled(); }
void NcclCommunicator::check_async_error() const { not_compiled(); }
void NcclCommunicator::all_reduce_sum(float*, std::size_t, void*) { not_compiled(); }
void NcclCommunicator::broadcast(void*, std::size_t, int, void*) { not_compiled(); }
void NcclCommunicator::send(int, const void*, std::size_t, void*) { not_compiled(); }
void NcclCommunicator::recv(int, void*, std::size_t, void*) { not_compiled(); }
void NcclCommunicator::group_start() { not_compiled(); }
void NcclCommunicator::group_end() { not_compiled(); }
void NcclCommunicator::abort() noexcept {}
NcclGroup::~NcclGroup() noexcept(false) {}

}  // namespace onnxtrain

#endif  // ONNXTRAIN_HAVE_NCCL
