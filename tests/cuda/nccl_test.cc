// NCCL for collectives on CUDA tensors (runtime/cuda/nccl*.h), on machines without a GPU:
//  - Kiln's declarations pinned to the real nccl.h when CMake finds one (KILN_NCCL_HEADER):
//    every value, the id's size and each entry point's exact C type;
//  - the library: found and every entry point resolved, its version the header's, a missing
//    one named with how to install it, and ncclGetUniqueId (which needs no GPU);
//  - NcclCommunicator against a stand-in NCCL and a stand-in host Communicator: the bootstrap,
//    the arguments each collective passes, and wait()'s timeout and error paths;
//  - NcclCommunicator against the real library, whose initialization fails without a GPU.
// What only a GPU shows (the collectives' results) is left to a run on one.
#include "runtime/cuda/nccl.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/communicator.h"
#include "kiln/error.h"
#include "runtime/cuda/nccl_api.h"
#include "tests/test_util.h"

#ifdef KILN_NCCL_HEADER
#include KILN_NCCL_HEADER
#endif

namespace kiln {
namespace {

namespace rc = runtime::cuda;
using rc::NcclApi;
using rc::NcclCommunicator;
using rc::NcclDataType;
using rc::NcclRedOp;
using rc::NcclResult;

using kiln::testing::ScopedEnv;

// NCCL's bootstrap listens on a network interface of its choice; the tests keep it on the
// loopback one (unless the caller chose one). Read once, when NCCL first initializes.
void keep_nccl_on_loopback() { ::setenv("NCCL_SOCKET_IFNAME", "lo", 0); }

// The process's NCCL as the candidates find it, or nullopt (with the reason) where no file
// is there at all; a file that is there but unusable is a failure, not a skip.
std::optional<NcclApi> installed_nccl(std::string& why_not) {
  std::optional<ScopedEnv> no_override;
  if (std::getenv("KILN_NCCL_LIBRARY") != nullptr) no_override.emplace("KILN_NCCL_LIBRARY", "");
  NcclApi api = rc::load_nccl_api(rc::nccl_library_candidates());
  if (!api.status.ok() && api.status.message().find(" lacks ") == std::string::npos) {
    why_not = std::string(api.status.message());
    return std::nullopt;
  }
  return api;
}

// ---------------------------------------------------------------------------------------
// The declarations, against nccl.h.

#ifdef KILN_NCCL_HEADER
// nccl.h's type for each of Kiln's stand-ins, through pointers, const and function types, so
// that each entry point's type can be compared whole with the header's declaration.
template <class T>
struct InHeader {
  using type = T;
};
template <class T>
struct InHeader<T*> {
  using type = typename InHeader<T>::type*;
};
template <class T>
struct InHeader<const T> {
  using type = const typename InHeader<T>::type;
};
template <class R, class... A>
struct InHeader<R (*)(A...)> {
  using type = typename InHeader<R>::type (*)(typename InHeader<A>::type...);
};
template <>
struct InHeader<NcclResult> {
  using type = ncclResult_t;
};
template <>
struct InHeader<NcclDataType> {
  using type = ncclDataType_t;
};
template <>
struct InHeader<NcclRedOp> {
  using type = ncclRedOp_t;
};
template <>
struct InHeader<rc::NcclUniqueId> {
  using type = ncclUniqueId;
};
template <>
struct InHeader<rc::NcclCommContext> {
  using type = ::ncclComm;
};
template <>
struct InHeader<rc::NcclConfig> {
  using type = ncclConfig_t;
};
template <>
struct InHeader<std::remove_pointer_t<rc::CUstream>> {
  using type = ::CUstream_st;  // cudaStream_t points to one
};
template <class Kiln, class Header>
constexpr bool kSameType = std::is_same_v<typename InHeader<Kiln>::type, Header>;

static_assert(std::is_same_v<std::remove_pointer_t<cudaStream_t>, ::CUstream_st>);
static_assert(kSameType<rc::NcclComm, ncclComm_t>);
static_assert(kSameType<rc::NcclGetVersionFn, decltype(&::ncclGetVersion)>);
static_assert(kSameType<rc::NcclGetUniqueIdFn, decltype(&::ncclGetUniqueId)>);
static_assert(kSameType<rc::NcclCommInitRankFn, decltype(&::ncclCommInitRank)>);
static_assert(kSameType<rc::NcclCommInitRankConfigFn, decltype(&::ncclCommInitRankConfig)>);
static_assert(kSameType<rc::NcclCommDestroyFn, decltype(&::ncclCommDestroy)>);
static_assert(kSameType<rc::NcclCommAbortFn, decltype(&::ncclCommAbort)>);
static_assert(kSameType<rc::NcclCommGetAsyncErrorFn, decltype(&::ncclCommGetAsyncError)>);
static_assert(kSameType<rc::NcclGetErrorStringFn, decltype(&::ncclGetErrorString)>);
static_assert(kSameType<rc::NcclGetLastErrorFn, decltype(&::ncclGetLastError)>);
static_assert(kSameType<rc::NcclAllReduceFn, decltype(&::ncclAllReduce)>);
static_assert(kSameType<rc::NcclAllGatherFn, decltype(&::ncclAllGather)>);
static_assert(kSameType<rc::NcclReduceScatterFn, decltype(&::ncclReduceScatter)>);
static_assert(kSameType<rc::NcclBroadcastFn, decltype(&::ncclBroadcast)>);
static_assert(kSameType<rc::NcclSendFn, decltype(&::ncclSend)>);
static_assert(kSameType<rc::NcclRecvFn, decltype(&::ncclRecv)>);
static_assert(kSameType<rc::NcclGroupFn, decltype(&::ncclGroupStart)>);
static_assert(kSameType<rc::NcclGroupFn, decltype(&::ncclGroupEnd)>);

// The values, and the sizes that pass them by value.
constexpr int value(auto e) { return static_cast<int>(e); }
static_assert(sizeof(NcclResult) == sizeof(ncclResult_t));
static_assert(sizeof(NcclDataType) == sizeof(ncclDataType_t));
static_assert(sizeof(NcclRedOp) == sizeof(ncclRedOp_t));
static_assert(rc::kNcclUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(sizeof(rc::NcclUniqueId) == sizeof(ncclUniqueId));
static_assert(alignof(rc::NcclUniqueId) == alignof(ncclUniqueId));
// Kiln's NcclConfig is the head of ncclConfig_t: each field where the header has it, and the
// values NCCL_CONFIG_INITIALIZER puts in the fields Kiln leaves alone.
static_assert(std::is_standard_layout_v<rc::NcclConfig>);
static_assert(sizeof(rc::NcclConfig) <= sizeof(ncclConfig_t));
static_assert(offsetof(rc::NcclConfig, size) == offsetof(ncclConfig_t, size));
static_assert(offsetof(rc::NcclConfig, magic) == offsetof(ncclConfig_t, magic));
static_assert(offsetof(rc::NcclConfig, version) == offsetof(ncclConfig_t, version));
static_assert(offsetof(rc::NcclConfig, blocking) == offsetof(ncclConfig_t, blocking));
static_assert(offsetof(rc::NcclConfig, cga_cluster_size) == offsetof(ncclConfig_t, cgaClusterSize));
static_assert(offsetof(rc::NcclConfig, min_ctas) == offsetof(ncclConfig_t, minCTAs));
static_assert(offsetof(rc::NcclConfig, max_ctas) == offsetof(ncclConfig_t, maxCTAs));
static_assert(offsetof(rc::NcclConfig, net_name) == offsetof(ncclConfig_t, netName));
static_assert(sizeof(rc::NcclConfig) == offsetof(ncclConfig_t, netName) + sizeof(const char*));
constexpr ncclConfig_t kHeaderConfig = NCCL_CONFIG_INITIALIZER;
static_assert(kHeaderConfig.magic == rc::kNcclApiMagic);
static_assert(kHeaderConfig.blocking == rc::kNcclConfigUndefInt);
static_assert(kHeaderConfig.cgaClusterSize == rc::kNcclConfigUndefInt);
static_assert(kHeaderConfig.netName == nullptr);
static_assert(rc::kNcclConfigVersion == NCCL_VERSION(2, 17, 0));
static_assert(rc::kNcclConfigVersion <= NCCL_VERSION_CODE);
static_assert(value(NcclResult::kSuccess) == ncclSuccess);
static_assert(value(NcclResult::kUnhandledCudaError) == ncclUnhandledCudaError);
static_assert(value(NcclResult::kSystemError) == ncclSystemError);
static_assert(value(NcclResult::kInternalError) == ncclInternalError);
static_assert(value(NcclResult::kInvalidArgument) == ncclInvalidArgument);
static_assert(value(NcclResult::kInvalidUsage) == ncclInvalidUsage);
static_assert(value(NcclResult::kRemoteError) == ncclRemoteError);
static_assert(value(NcclResult::kInProgress) == ncclInProgress);
static_assert(value(NcclDataType::kInt8) == ncclInt8);
static_assert(value(NcclDataType::kUint8) == ncclUint8);
static_assert(value(NcclDataType::kInt32) == ncclInt32);
static_assert(value(NcclDataType::kUint32) == ncclUint32);
static_assert(value(NcclDataType::kInt64) == ncclInt64);
static_assert(value(NcclDataType::kUint64) == ncclUint64);
static_assert(value(NcclDataType::kFloat16) == ncclFloat16);
static_assert(value(NcclDataType::kFloat32) == ncclFloat32);
static_assert(value(NcclDataType::kFloat64) == ncclFloat64);
static_assert(value(NcclDataType::kBfloat16) == ncclBfloat16);
static_assert(value(NcclRedOp::kSum) == ncclSum);
static_assert(value(NcclRedOp::kProd) == ncclProd);
static_assert(value(NcclRedOp::kMax) == ncclMax);
static_assert(value(NcclRedOp::kMin) == ncclMin);
static_assert(value(NcclRedOp::kAvg) == ncclAvg);
#endif

TEST(NcclDeclarations, ArePinnedToTheRealHeader) {
#ifdef KILN_NCCL_HEADER
  std::printf("[ pinned   ] against %s (NCCL %d)\n", KILN_NCCL_HEADER, NCCL_VERSION_CODE);
#else
  GTEST_SKIP() << "CMake found no nccl.h: Kiln's declarations were not checked";
#endif
}

// ---------------------------------------------------------------------------------------
// The library.

TEST(NcclLibrary, IsFoundAndEveryEntryPointResolves) {
  std::string why_not;
  const std::optional<NcclApi> api = installed_nccl(why_not);
  if (!api) GTEST_SKIP() << "libnccl.so.2 is not installed here: " << why_not;
  ASSERT_TRUE(api->status.ok()) << api->status.message();
  for (const void* entry :
       {reinterpret_cast<const void*>(api->get_version), (const void*)api->get_unique_id,
        (const void*)api->comm_init_rank, (const void*)api->comm_destroy,
        (const void*)api->comm_abort, (const void*)api->comm_get_async_error,
        (const void*)api->get_error_string, (const void*)api->all_reduce,
        (const void*)api->all_gather, (const void*)api->reduce_scatter, (const void*)api->broadcast,
        (const void*)api->send, (const void*)api->recv, (const void*)api->group_start,
        (const void*)api->group_end}) {
    EXPECT_NE(entry, nullptr);
  }
  EXPECT_NE(api->comm_init_rank_config, nullptr) << "NCCL 2.14 or later: a bounded init";
  int version = 0;
  ASSERT_EQ(api->get_version(&version), NcclResult::kSuccess);
  EXPECT_GE(version, 21300) << "NCCL 2.13 or later (ncclGetLastError)";
  EXPECT_STREQ(api->get_error_string(NcclResult::kRemoteError),
               "remote process exited or there was a network error");
  std::printf("[ loaded   ] %s, NCCL version %d\n", api->library.c_str(), version);
}

// The library that came with the header (CMake's KILN_NCCL_HEADER_LIBRARY) reports the
// header's version: the two are one release, so the pin speaks for the library.
TEST(NcclLibrary, TheHeadersLibraryHasTheHeadersVersion) {
#if defined(KILN_NCCL_HEADER) && defined(KILN_NCCL_HEADER_LIBRARY)
  if (!std::filesystem::exists(KILN_NCCL_HEADER_LIBRARY)) {  // a build carried elsewhere
    GTEST_SKIP() << "the build machine's " << KILN_NCCL_HEADER_LIBRARY << " is not here";
  }
  const NcclApi api = rc::load_nccl_api({KILN_NCCL_HEADER_LIBRARY});
  ASSERT_TRUE(api.status.ok()) << api.status.message();
  int version = 0;
  ASSERT_EQ(api.get_version(&version), NcclResult::kSuccess);
  EXPECT_EQ(version, NCCL_VERSION_CODE) << KILN_NCCL_HEADER_LIBRARY;
#else
  GTEST_SKIP() << "CMake found no libnccl.so.2 beside nccl.h";
#endif
}

TEST(NcclLibrary, AMissingLibraryIsNamedWithHowToInstallIt) {
  ScopedEnv env("KILN_NCCL_LIBRARY", "/nonexistent");
  EXPECT_EQ(rc::nccl_library_candidates(), std::vector<std::string>{"/nonexistent"});
  const NcclApi api = rc::load_nccl_api(rc::nccl_library_candidates());
  ASSERT_FALSE(api.status.ok());
  const std::string message(api.status.message());
  for (const char* part : {"libnccl.so.2", "/nonexistent", "nvidia-nccl-cu13", "KILN_NCCL_LIBRARY"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
  EXPECT_EQ(api.all_reduce, nullptr);
}

TEST(NcclLibrary, WithoutOverrideTheSystemsIsTriedBeforeTheWheels) {
  ScopedEnv env("KILN_NCCL_LIBRARY", "");
  ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(
      rc::nccl_library_candidates(),
      (std::vector<std::string>{
          "libnccl.so.2", "/home/someone/.cache/kiln/tools/nccl/nvidia/nccl/lib/libnccl.so.2"}));
}

// A file that loads but is not NCCL (here libbz2) is closed, and the next one tried.
TEST(NcclLibrary, AFileLackingAnEntryPointIsClosedAndTheNextOneTried) {
  constexpr const char* kNotNccl = "libbz2.so.1";
  void* probe = dlopen(kNotNccl, RTLD_NOW | RTLD_LOCAL);
  if (probe == nullptr) GTEST_SKIP() << kNotNccl << " is not installed here";
  dlclose(probe);
  const NcclApi alone = rc::load_nccl_api({kNotNccl});
  EXPECT_FALSE(alone.status.ok());
  EXPECT_NE(alone.status.message().find("libbz2.so.1 lacks ncclGetVersion"), std::string::npos)
      << alone.status.message();
  std::string why_not;
  const std::optional<NcclApi> installed = installed_nccl(why_not);
  if (!installed || !installed->status.ok()) return;
  const NcclApi api = rc::load_nccl_api({kNotNccl, installed->library});
  EXPECT_TRUE(api.status.ok()) << api.status.message();
  EXPECT_EQ(api.library, installed->library);
}

// ncclGetUniqueId needs no GPU: it starts NCCL's bootstrap listener and describes it.
TEST(NcclLibrary, GetUniqueIdWorksWithoutAGpu) {
  std::string why_not;
  const std::optional<NcclApi> api = installed_nccl(why_not);
  if (!api) GTEST_SKIP() << "libnccl.so.2 is not installed here: " << why_not;
  ASSERT_TRUE(api->status.ok()) << api->status.message();
  keep_nccl_on_loopback();
  rc::NcclUniqueId id{};
  const NcclResult result = api->get_unique_id(&id);
  ASSERT_EQ(result, NcclResult::kSuccess) << rc::nccl_failure(*api, result, "ncclGetUniqueId");
  const rc::NcclUniqueId zero{};
  EXPECT_NE(std::memcmp(&id, &zero, sizeof(id)), 0);
  rc::NcclUniqueId again{};
  ASSERT_EQ(api->get_unique_id(&again), NcclResult::kSuccess);
  EXPECT_NE(std::memcmp(&id, &again, sizeof(id)), 0) << "each id names a new bootstrap";
}

// ---------------------------------------------------------------------------------------
// A stand-in host Communicator: one process playing rank `rank` of `size`. What the other
// ranks would contribute is set by the test.

class FakeHost : public comm::Communicator {
 public:
  FakeHost(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "fake"; }
  void all_reduce(const void* in, void* out, int64_t count, DType dtype,
                  comm::ReduceOp op) override {
    ASSERT_EQ(dtype, DType::I32);
    ASSERT_EQ(op, comm::ReduceOp::kMin);
    for (int64_t i = 0; i < count; ++i) {
      const int32_t mine = static_cast<const int32_t*>(in)[i];
      static_cast<int32_t*>(out)[i] = others_usable ? mine : 0;
    }
  }
  void all_gather(const void*, void*, int64_t) override { FAIL() << "unexpected"; }
  void reduce_scatter(const void*, void*, int64_t, DType, comm::ReduceOp) override {
    FAIL() << "unexpected";
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    ++broadcasts;
    broadcast_bytes = bytes;
    broadcast_root = root;
    if (rank_ != root) std::memcpy(data, roots_message.data(), bytes);
  }
  void send(const void*, int64_t, int) override { FAIL() << "unexpected"; }
  void recv(void*, int64_t, int) override { FAIL() << "unexpected"; }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }

  bool others_usable = true;
  std::vector<char> roots_message;  // what rank 0 broadcasts, for a rank other than 0
  int broadcasts = 0;
  int64_t broadcast_bytes = 0;
  int broadcast_root = -1;

 private:
  int rank_, size_;
};

// rank 0's broadcast: ok flag (int32), then the id.
std::vector<char> roots_message(bool ok, char fill) {
  std::vector<char> message(sizeof(int32_t) + rc::kNcclUniqueIdBytes, fill);
  const int32_t flag = ok ? 1 : 0;
  std::memcpy(message.data(), &flag, sizeof(flag));
  return message;
}

// ---------------------------------------------------------------------------------------
// A stand-in NCCL: records the calls it gets, returns what the test sets.

struct Call {
  std::string name;
  const void* send = nullptr;
  const void* recv = nullptr;
  size_t count = 0;
  NcclDataType type = NcclDataType::kInt8;
  NcclRedOp op = NcclRedOp::kProd;
  int rank = -1;  // root or peer
  rc::NcclComm comm = nullptr;
  rc::CUstream stream = nullptr;
};

struct FakeNccl {
  std::vector<Call> calls;
  NcclResult unique_id_result = NcclResult::kSuccess;
  NcclResult init_result = NcclResult::kSuccess;
  NcclResult enqueue_result = NcclResult::kSuccess;
  NcclResult async_error = NcclResult::kSuccess;
  int init_nranks = -1, init_rank = -1;
  std::optional<rc::NcclConfig> init_config;  // what ncclCommInitRankConfig was given
  // NCCL's launch thread may fail before the call returns: an error, with a communicator.
  bool init_error_with_comm = false;
  // How many ncclCommGetAsyncError calls answer ncclInProgress before `async_error` is
  // answered: NCCL still connecting after a nonblocking call.
  int polls_in_progress = 0;
  int async_polls = 0;
  rc::NcclUniqueId init_id{};
  int destroys = 0, aborts = 0;
};
FakeNccl* fake = nullptr;
char fake_comm_storage;  // its address stands for the communicator NCCL would make
rc::NcclComm const kFakeComm = reinterpret_cast<rc::NcclComm>(&fake_comm_storage);

NcclResult enqueue(const Call& call) {
  fake->calls.push_back(call);
  return fake->enqueue_result;
}

NcclApi fake_api() {
  NcclApi api;
  api.library = "fake";
  api.get_version = [](int* v) {
    *v = 23203;
    return NcclResult::kSuccess;
  };
  api.get_unique_id = [](rc::NcclUniqueId* id) {
    std::memset(id->internal, 0x5a, sizeof(id->internal));
    fake->calls.push_back({.name = "ncclGetUniqueId"});
    return fake->unique_id_result;
  };
  api.comm_init_rank = [](rc::NcclComm* comm, int nranks, rc::NcclUniqueId id, int rank) {
    fake->init_nranks = nranks;
    fake->init_rank = rank;
    fake->init_id = id;
    if (fake->init_result == NcclResult::kSuccess) *comm = kFakeComm;
    return fake->init_result;
  };
  api.comm_init_rank_config = [](rc::NcclComm* comm, int nranks, rc::NcclUniqueId id, int rank,
                                 rc::NcclConfig* config) {
    fake->init_config = *config;
    fake->init_nranks = nranks;
    fake->init_rank = rank;
    fake->init_id = id;
    const bool made = fake->init_result == NcclResult::kSuccess ||
                      fake->init_result == NcclResult::kInProgress || fake->init_error_with_comm;
    *comm = made ? kFakeComm : nullptr;
    return fake->init_result;
  };
  api.comm_destroy = [](rc::NcclComm) {
    ++fake->destroys;
    return NcclResult::kSuccess;
  };
  api.comm_abort = [](rc::NcclComm) {
    ++fake->aborts;
    return NcclResult::kSuccess;
  };
  api.comm_get_async_error = [](rc::NcclComm, NcclResult* error) {
    ++fake->async_polls;
    if (fake->polls_in_progress > 0) {
      --fake->polls_in_progress;
      *error = NcclResult::kInProgress;
      return NcclResult::kSuccess;
    }
    *error = fake->async_error;
    return NcclResult::kSuccess;
  };
  api.get_error_string = [](NcclResult r) {
    return r == NcclResult::kRemoteError ? "remote went away" : "stand-in error";
  };
  api.all_reduce = [](const void* s, void* r, size_t n, NcclDataType t, NcclRedOp op,
                      rc::NcclComm c, rc::CUstream st) {
    return enqueue({"ncclAllReduce", s, r, n, t, op, -1, c, st});
  };
  api.all_gather = [](const void* s, void* r, size_t n, NcclDataType t, rc::NcclComm c,
                      rc::CUstream st) {
    return enqueue({"ncclAllGather", s, r, n, t, NcclRedOp::kProd, -1, c, st});
  };
  api.reduce_scatter = [](const void* s, void* r, size_t n, NcclDataType t, NcclRedOp op,
                          rc::NcclComm c, rc::CUstream st) {
    return enqueue({"ncclReduceScatter", s, r, n, t, op, -1, c, st});
  };
  api.broadcast = [](const void* s, void* r, size_t n, NcclDataType t, int root, rc::NcclComm c,
                     rc::CUstream st) {
    return enqueue({"ncclBroadcast", s, r, n, t, NcclRedOp::kProd, root, c, st});
  };
  api.send = [](const void* s, size_t n, NcclDataType t, int peer, rc::NcclComm c,
                rc::CUstream st) {
    return enqueue({"ncclSend", s, nullptr, n, t, NcclRedOp::kProd, peer, c, st});
  };
  api.recv = [](void* r, size_t n, NcclDataType t, int peer, rc::NcclComm c, rc::CUstream st) {
    return enqueue({"ncclRecv", nullptr, r, n, t, NcclRedOp::kProd, peer, c, st});
  };
  api.group_start = [] { return enqueue({.name = "ncclGroupStart"}); };
  api.group_end = [] { return enqueue({.name = "ncclGroupEnd"}); };
  return api;
}

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  NcclCommunicatorTest() { fake = &state_; }
  ~NcclCommunicatorTest() override { fake = nullptr; }

  // Rank `rank` of `size`, made against the stand-in (rank 0's id is 0x5a bytes).
  std::unique_ptr<NcclCommunicator> make(int rank, int size) {
    host_ = std::make_unique<FakeHost>(rank, size);
    host_->roots_message = roots_message(true, 0x5a);
    return std::make_unique<NcclCommunicator>(*host_, api_);
  }

  FakeNccl state_;
  const NcclApi api_ = fake_api();
  std::unique_ptr<FakeHost> host_;
  char stream_storage_ = 0;  // its address stands for a CUstream
  void* const stream_ = &stream_storage_;
};

// Runs `f`, which must throw kiln::Error; returns its message.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no kiln::Error";
  return "";
}

TEST_F(NcclCommunicatorTest, RankZeroMakesTheIdAndTheHostBroadcastsIt) {
  auto comm = make(0, 2);
  ASSERT_EQ(state_.calls.size(), 1u);
  EXPECT_EQ(state_.calls[0].name, "ncclGetUniqueId");
  EXPECT_EQ(host_->broadcasts, 1);
  EXPECT_EQ(host_->broadcast_root, 0);
  EXPECT_EQ(host_->broadcast_bytes, int64_t{4 + 128});
  EXPECT_EQ(state_.init_nranks, 2);
  EXPECT_EQ(state_.init_rank, 0);
  EXPECT_EQ(state_.init_id.internal[127], 0x5a);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 2);
}

TEST_F(NcclCommunicatorTest, OtherRanksUseRankZerosId) {
  host_ = std::make_unique<FakeHost>(1, 3);
  host_->roots_message = roots_message(true, 0x33);
  NcclCommunicator comm(*host_, api_);
  EXPECT_TRUE(state_.calls.empty()) << "only rank 0 makes an id";
  EXPECT_EQ(state_.init_nranks, 3);
  EXPECT_EQ(state_.init_rank, 1);
  EXPECT_EQ(state_.init_id.internal[0], 0x33);
  EXPECT_EQ(state_.init_id.internal[127], 0x33);
}

TEST_F(NcclCommunicatorTest, RankZerosFailureIsEveryRanksError) {
  state_.unique_id_result = NcclResult::kSystemError;
  const std::string at_zero = error_of([&] { make(0, 2); });
  EXPECT_NE(at_zero.find("[nccl_init] rank 0 of 2 (nccl): ncclGetUniqueId failed"),
            std::string::npos)
      << at_zero;
  EXPECT_EQ(host_->broadcasts, 1) << "rank 0 still tells the others";
  host_ = std::make_unique<FakeHost>(1, 2);
  host_->roots_message = roots_message(false, 0);
  const std::string at_one = error_of([&] { NcclCommunicator comm(*host_, api_); });
  EXPECT_NE(at_one.find("[nccl_init] rank 1 of 2 (nccl): rank 0 could not make NCCL's id"),
            std::string::npos)
      << at_one;
  EXPECT_EQ(state_.init_nranks, -1) << "NCCL's initialization was called";
}

TEST_F(NcclCommunicatorTest, NcclMissingOnAnyRankFailsEveryRank) {
  host_ = std::make_unique<FakeHost>(0, 2);
  host_->others_usable = false;
  const std::string message = error_of([&] { NcclCommunicator comm(*host_, api_); });
  EXPECT_NE(message.find("NCCL is missing on another rank"), std::string::npos) << message;
  EXPECT_TRUE(state_.calls.empty());
  EXPECT_EQ(host_->broadcasts, 0);

  ScopedEnv env("KILN_NCCL_LIBRARY", "/nonexistent");
  const NcclApi missing = rc::load_nccl_api(rc::nccl_library_candidates());
  host_ = std::make_unique<FakeHost>(1, 2);
  const std::string here = error_of([&] { NcclCommunicator comm(*host_, missing); });
  for (const char* part :
       {"[nccl_init] rank 1 of 2 (nccl)", "libnccl.so.2", "nvidia-nccl-cu13", "KILN_NCCL_LIBRARY"})
    EXPECT_NE(here.find(part), std::string::npos) << part << " in: " << here;
}

TEST_F(NcclCommunicatorTest, InitFailureNamesNcclsError) {
  state_.init_result = NcclResult::kUnhandledCudaError;
  const std::string message = error_of([&] { make(0, 1); });
  EXPECT_NE(message.find("[nccl_init] rank 0 of 1 (nccl): ncclCommInitRankConfig failed: "
                         "stand-in error (1)"),
            std::string::npos)
      << message;
  EXPECT_EQ(state_.aborts, 0) << "no communicator was made";
}

// The communicator is made nonblocking, through a config NCCL accepts (its magic, a version
// that has `blocking`, the size of the fields Kiln sets), and is used once NCCL says it is
// ready.
TEST_F(NcclCommunicatorTest, InitIsNonblockingAndPolledUntilReady) {
  state_.init_result = NcclResult::kInProgress;
  state_.polls_in_progress = 4;
  auto comm = make(1, 2);
  ASSERT_TRUE(state_.init_config.has_value());
  EXPECT_EQ(state_.init_config->blocking, 0);
  EXPECT_EQ(state_.init_config->magic, 0xcafebeefu);
  EXPECT_GE(state_.init_config->version, 21400u) << "ncclConfig_t.blocking is read from 2.14";
  EXPECT_EQ(state_.init_config->size, sizeof(rc::NcclConfig));
  EXPECT_EQ(state_.init_config->cga_cluster_size, INT_MIN) << "left to NCCL";
  EXPECT_EQ(state_.init_config->net_name, nullptr);
  EXPECT_EQ(state_.async_polls, 5) << "four answers of in progress, then ready";
  EXPECT_EQ(state_.init_rank, 1);
  comm->all_reduce(1, 2, 3, DType::F32, comm::ReduceOp::kSum, stream_);
  ASSERT_EQ(state_.calls.size(), 1u);
  EXPECT_EQ(state_.calls[0].comm, kFakeComm);
  EXPECT_EQ(state_.aborts, 0);
}

TEST_F(NcclCommunicatorTest, InitThatFailsWhileInProgressIsAbortedWithNcclsError) {
  state_.init_result = NcclResult::kInProgress;
  state_.polls_in_progress = 2;
  state_.async_error = NcclResult::kRemoteError;
  const std::string message = error_of([&] { make(0, 2); });
  EXPECT_NE(message.find("[nccl_init] rank 0 of 2 (nccl): ncclCommInitRankConfig failed: remote "
                         "went away (6); NCCL's communicator was aborted"),
            std::string::npos)
      << message;
  EXPECT_EQ(state_.aborts, 1);
  EXPECT_EQ(state_.destroys, 0);
}

// A peer that died after the id's broadcast never reaches NCCL's bootstrap: the others give up
// after KILN_DIST_TIMEOUT instead of waiting in ncclCommInitRank forever.
TEST_F(NcclCommunicatorTest, InitThatNeverFinishesTimesOutAndIsAborted) {
  ScopedEnv timeout("KILN_DIST_TIMEOUT", "0.2");
  state_.init_result = NcclResult::kInProgress;
  state_.polls_in_progress = std::numeric_limits<int>::max();
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] { make(1, 2); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, 0.2);
  EXPECT_LT(seconds, 10.0);
  for (const char* part : {"[nccl_init] rank 1 of 2 (nccl): ncclCommInitRankConfig not done after "
                           "0.2 s (KILN_DIST_TIMEOUT)",
                           "never joined", "aborted"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
  EXPECT_EQ(state_.aborts, 1);
  EXPECT_GT(state_.async_polls, 1);
}

TEST_F(NcclCommunicatorTest, InitErrorWithACommunicatorAbortsIt) {
  state_.init_result = NcclResult::kSystemError;
  state_.init_error_with_comm = true;
  const std::string message = error_of([&] { make(1, 2); });
  EXPECT_NE(message.find("ncclCommInitRankConfig failed: stand-in error (2)"), std::string::npos)
      << message;
  EXPECT_EQ(state_.aborts, 1);
  EXPECT_EQ(state_.destroys, 0);
}

TEST_F(NcclCommunicatorTest, KilnNcclBlockingMakesABlockingCommunicator) {
  ScopedEnv blocking("KILN_NCCL_BLOCKING", "1");
  auto comm = make(0, 2);
  ASSERT_TRUE(state_.init_config.has_value());
  EXPECT_EQ(state_.init_config->blocking, 1);
}

// ncclCommDestroy frees nothing unless the communicator's state is success: an error NCCL
// reports after the last wait is aborted instead.
TEST_F(NcclCommunicatorTest, ACommunicatorInErrorIsAbortedNotDestroyed) {
  auto comm = make(0, 2);
  comm->all_reduce(1, 2, 3, DType::F32, comm::ReduceOp::kSum, stream_);
  comm->wait(stream_, [] { return true; });
  state_.async_error = NcclResult::kRemoteError;
  comm.reset();
  EXPECT_EQ(state_.aborts, 1);
  EXPECT_EQ(state_.destroys, 0);
}

// A failure inside a group closes the group before aborting: NCCL would only queue an abort
// issued inside an open group.
TEST_F(NcclCommunicatorTest, AFailureInsideAGroupEndsTheGroupBeforeAborting) {
  auto comm = make(0, 2);
  comm->group_start();
  state_.calls.clear();
  state_.enqueue_result = NcclResult::kInvalidUsage;
  const std::string message = error_of([&] { comm->send(1, 1, DType::F32, 1, stream_); });
  EXPECT_NE(message.find("ncclSend failed"), std::string::npos) << message;
  ASSERT_EQ(state_.calls.size(), 2u);
  EXPECT_EQ(state_.calls[0].name, "ncclSend");
  EXPECT_EQ(state_.calls[1].name, "ncclGroupEnd");
  EXPECT_EQ(state_.aborts, 1);
}

// A library without ncclCommInitRankConfig (before 2.14) gets the blocking call.
TEST_F(NcclCommunicatorTest, AnOlderLibraryInitializesWithTheBlockingCall) {
  NcclApi older = fake_api();
  older.comm_init_rank_config = nullptr;
  host_ = std::make_unique<FakeHost>(0, 2);
  host_->roots_message = roots_message(true, 0x5a);
  {
    NcclCommunicator comm(*host_, older);
    EXPECT_FALSE(state_.init_config.has_value());
    EXPECT_EQ(state_.init_nranks, 2);
    EXPECT_EQ(state_.async_polls, 0);
  }
  state_.init_result = NcclResult::kUnhandledCudaError;
  const std::string message = error_of([&] { NcclCommunicator comm(*host_, older); });
  EXPECT_NE(message.find("ncclCommInitRank failed: stand-in error (1)"), std::string::npos)
      << message;
}

// On a nonblocking communicator a collective may answer ncclInProgress (NCCL connecting to
// its peers on first use): Kiln waits until NCCL is done before the next call.
TEST_F(NcclCommunicatorTest, ACollectiveInProgressIsPolledUntilReady) {
  auto comm = make(0, 2);
  state_.async_polls = 0;
  state_.enqueue_result = NcclResult::kInProgress;
  state_.polls_in_progress = 3;
  comm->all_gather(1, 2, 3, DType::F32, stream_);
  EXPECT_EQ(state_.async_polls, 4);
  EXPECT_EQ(state_.aborts, 0);
  state_.enqueue_result = NcclResult::kSuccess;
  comm->wait(stream_, [] { return true; });
  comm.reset();
  EXPECT_EQ(state_.destroys, 1);
}

TEST_F(NcclCommunicatorTest, EachDtypeAndOpIsNcclsOwn) {
  auto comm = make(0, 2);
  state_.calls.clear();
  const std::pair<DType, NcclDataType> types[] = {
      {DType::F16, NcclDataType::kFloat16}, {DType::BF16, NcclDataType::kBfloat16},
      {DType::F32, NcclDataType::kFloat32}, {DType::F64, NcclDataType::kFloat64},
      {DType::I32, NcclDataType::kInt32},   {DType::I64, NcclDataType::kInt64}};
  const std::pair<comm::ReduceOp, NcclRedOp> ops[] = {{comm::ReduceOp::kSum, NcclRedOp::kSum},
                                                      {comm::ReduceOp::kMax, NcclRedOp::kMax},
                                                      {comm::ReduceOp::kMin, NcclRedOp::kMin}};
  for (const auto& [dtype, type] : types) {
    for (const auto& [op, nccl_op] : ops) {
      comm->all_reduce(0x1000, 0x2000, 7, dtype, op, stream_);
      ASSERT_FALSE(state_.calls.empty());
      const Call& call = state_.calls.back();
      EXPECT_EQ(call.type, type) << dtype_name(dtype);
      EXPECT_EQ(call.op, nccl_op) << comm::reduce_op_name(op);
    }
  }
}

TEST_F(NcclCommunicatorTest, EachCollectivePassesItsArguments) {
  auto comm = make(1, 4);
  comm->all_reduce(0x1000, 0x2000, 5, DType::F32, comm::ReduceOp::kSum, stream_);
  comm->all_gather(0x1100, 0x2100, 6, DType::BF16, stream_);
  comm->reduce_scatter(0x1200, 0x2200, 7, DType::I64, comm::ReduceOp::kMax, stream_);
  comm->broadcast(0x1300, 8, DType::F16, 2, stream_);
  comm->group_start();
  comm->send(0x1400, 9, DType::F64, 2, stream_);
  comm->recv(0x1500, 10, DType::I32, 0, stream_);
  comm->group_end();
  const auto p = [](uint64_t address) {
    return reinterpret_cast<const void*>(address);  // NOLINT(performance-no-int-to-ptr)
  };
  const auto stream = static_cast<rc::CUstream>(stream_);
  ASSERT_EQ(state_.calls.size(), 8u);
  const Call& ar = state_.calls[0];
  EXPECT_EQ(ar.name, "ncclAllReduce");
  EXPECT_EQ(ar.send, p(0x1000));
  EXPECT_EQ(ar.recv, p(0x2000));
  EXPECT_EQ(ar.count, 5u);
  EXPECT_EQ(ar.comm, kFakeComm);
  EXPECT_EQ(ar.stream, stream);
  const Call& ag = state_.calls[1];
  EXPECT_EQ(ag.name, "ncclAllGather");
  EXPECT_EQ(ag.send, p(0x1100));
  EXPECT_EQ(ag.recv, p(0x2100));
  EXPECT_EQ(ag.count, 6u) << "NCCL counts what each rank sends";
  EXPECT_EQ(ag.type, NcclDataType::kBfloat16);
  const Call& rs = state_.calls[2];
  EXPECT_EQ(rs.name, "ncclReduceScatter");
  EXPECT_EQ(rs.count, 7u) << "NCCL counts what each rank receives";
  EXPECT_EQ(rs.op, NcclRedOp::kMax);
  EXPECT_EQ(rs.type, NcclDataType::kInt64);
  const Call& bc = state_.calls[3];
  EXPECT_EQ(bc.name, "ncclBroadcast");
  EXPECT_EQ(bc.send, p(0x1300));
  EXPECT_EQ(bc.recv, p(0x1300)) << "in place";
  EXPECT_EQ(bc.rank, 2);
  EXPECT_EQ(state_.calls[4].name, "ncclGroupStart");
  const Call& send = state_.calls[5];
  EXPECT_EQ(send.name, "ncclSend");
  EXPECT_EQ(send.send, p(0x1400));
  EXPECT_EQ(send.rank, 2);
  EXPECT_EQ(send.type, NcclDataType::kFloat64);
  const Call& recv = state_.calls[6];
  EXPECT_EQ(recv.name, "ncclRecv");
  EXPECT_EQ(recv.recv, p(0x1500));
  EXPECT_EQ(recv.rank, 0);
  EXPECT_EQ(recv.count, 10u);
  EXPECT_EQ(state_.calls[7].name, "ncclGroupEnd");
}

TEST_F(NcclCommunicatorTest, BadArgumentsThrowBeforeNcclAndLeaveTheGroupUsable) {
  auto comm = make(0, 2);
  state_.calls.clear();
  const std::string dtype =
      error_of([&] { comm->all_reduce(1, 2, 3, DType::Bool, comm::ReduceOp::kSum, stream_); });
  EXPECT_NE(dtype.find("[all_reduce] rank 0 of 2 (nccl): dtype bool is not supported"),
            std::string::npos)
      << dtype;
  const std::string count = error_of([&] { comm->all_gather(1, 2, -1, DType::F32, stream_); });
  EXPECT_NE(count.find("count -1 is negative"), std::string::npos) << count;
  const std::string peer = error_of([&] { comm->send(1, 1, DType::F32, 2, stream_); });
  EXPECT_NE(peer.find("[send] rank 0 of 2 (nccl): peer 2 is not a rank of 2"), std::string::npos)
      << peer;
  const std::string root = error_of([&] { comm->broadcast(1, 1, DType::F32, -1, stream_); });
  EXPECT_NE(root.find("root -1 is not a rank"), std::string::npos) << root;
  EXPECT_TRUE(state_.calls.empty());
  EXPECT_EQ(state_.aborts, 0);
  comm->all_reduce(1, 2, 3, DType::F32, comm::ReduceOp::kSum, stream_);
  EXPECT_EQ(state_.calls.size(), 1u);
}

TEST_F(NcclCommunicatorTest, AFailedEnqueueAbortsAndEveryLaterCallThrows) {
  auto comm = make(1, 2);
  state_.enqueue_result = NcclResult::kInvalidUsage;
  const std::string message =
      error_of([&] { comm->all_reduce(1, 2, 3, DType::F32, comm::ReduceOp::kSum, stream_); });
  EXPECT_NE(
      message.find("[all_reduce] rank 1 of 2 (nccl): ncclAllReduce failed: stand-in error (5)"),
      std::string::npos)
      << message;
  EXPECT_EQ(state_.aborts, 1);
  state_.enqueue_result = NcclResult::kSuccess;
  state_.calls.clear();
  const std::string later = error_of([&] { comm->broadcast(1, 1, DType::F32, 0, stream_); });
  EXPECT_NE(later.find("[broadcast] rank 1 of 2 (nccl): the group failed earlier: [all_reduce]"),
            std::string::npos)
      << later;
  EXPECT_TRUE(state_.calls.empty());
  comm.reset();
  EXPECT_EQ(state_.aborts, 1) << "aborted once";
  EXPECT_EQ(state_.destroys, 0);
}

TEST_F(NcclCommunicatorTest, WaitReturnsWhenTheStreamIsDone) {
  auto comm = make(0, 2);
  comm->all_reduce(1, 2, 3, DType::F32, comm::ReduceOp::kSum, stream_);
  int polls = 0;
  comm->wait(stream_, [&] { return ++polls >= 5; });
  EXPECT_EQ(polls, 5);
  EXPECT_EQ(state_.aborts, 0);
  comm.reset();
  EXPECT_EQ(state_.destroys, 1) << "nothing pending: destroyed";
  EXPECT_EQ(state_.aborts, 0);
}

TEST_F(NcclCommunicatorTest, WaitTimesOutAbortsAndNamesTheCollective) {
  ScopedEnv timeout("KILN_DIST_TIMEOUT", "0.2");
  auto comm = make(1, 2);
  comm->all_reduce(1, 2, 3, DType::F32, comm::ReduceOp::kSum, stream_);
  const auto start = std::chrono::steady_clock::now();
  // Done after 30 s regardless, so a collective_timeout() that ignored KILN_DIST_TIMEOUT
  // fails this test instead of hanging it.
  const auto never_done = [&] {
    return std::chrono::steady_clock::now() - start > std::chrono::seconds(30);
  };
  const std::string message = error_of([&] { comm->wait(stream_, never_done); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, 0.2);
  EXPECT_LT(seconds, 10.0);
  for (const char* part :
       {"[all_reduce] rank 1 of 2 (nccl): not done after 0.2 s", "KILN_DIST_TIMEOUT", "aborted"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
  EXPECT_EQ(state_.aborts, 1);
  const std::string later = error_of([&] { comm->wait(stream_, [] { return true; }); });
  EXPECT_NE(later.find("the group failed earlier"), std::string::npos) << later;
  comm.reset();
  EXPECT_EQ(state_.aborts, 1);
  EXPECT_EQ(state_.destroys, 0);
}

TEST_F(NcclCommunicatorTest, WaitThrowsNcclsAsyncError) {
  auto comm = make(0, 2);
  comm->reduce_scatter(1, 2, 3, DType::F32, comm::ReduceOp::kSum, stream_);
  int polls = 0;
  state_.async_error = NcclResult::kInProgress;  // still going: not an error
  const std::string message = error_of([&] {
    comm->wait(stream_, [&] {
      if (++polls == 3) state_.async_error = NcclResult::kRemoteError;
      return false;
    });
  });
  EXPECT_GE(polls, 3);
  EXPECT_NE(message.find("[reduce_scatter] rank 0 of 2 (nccl): NCCL (asynchronously) failed: "
                         "remote went away (6)"),
            std::string::npos)
      << message;
  EXPECT_EQ(state_.aborts, 1);
}

TEST_F(NcclCommunicatorTest, ACollectiveNotWaitedForIsAbortedNotDestroyed) {
  auto comm = make(0, 2);
  comm->all_gather(1, 2, 3, DType::F32, stream_);
  comm.reset();
  EXPECT_EQ(state_.aborts, 1);
  EXPECT_EQ(state_.destroys, 0);
}

// ---------------------------------------------------------------------------------------
// The real library over one process: everything up to NCCL's initialization
// (ncclCommInitRankConfig) needs no GPU, and that fails without one, with NCCL's own reason.

TEST(NcclCommunicatorReal, OneProcessReachesNcclsInitialization) {
  std::string why_not;
  const std::optional<NcclApi> api = installed_nccl(why_not);
  if (!api) GTEST_SKIP() << "libnccl.so.2 is not installed here: " << why_not;
  ASSERT_TRUE(api->status.ok()) << api->status.message();
  keep_nccl_on_loopback();
  FakeHost host(0, 1);
  try {
    NcclCommunicator comm(host, *api);
    std::printf("[ gpu      ] a one-rank NCCL communicator was made\n");
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("[nccl_init] rank 0 of 1 (nccl): ncclCommInitRank"), std::string::npos)
        << message;
    std::printf("[ no gpu   ] %s\n", message.c_str());
  }
}

}  // namespace
}  // namespace kiln
