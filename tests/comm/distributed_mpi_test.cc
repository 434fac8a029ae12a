// The MPI communicator, run as several processes: ctest starts this program with
// `mpirun -np N` for N = 2, 3 and 4 (tests/CMakeLists.txt). Every rank runs every test in
// the same order, so each test's collectives match across the ranks.
//
// Inputs come from a seed that rank 0 draws and broadcasts (KILN_DIST_TEST_SEED repeats a
// run), so every rank can compute every other rank's inputs and thus the exact expected
// result. Floating inputs are multiples of 1/8 small enough that every sum is exact in any
// order, so results compare bit for bit. Outputs are poisoned before each call, with guard
// elements past the end that must stay poisoned.
//
// The MpiFailureTest tests break their communicator (or never get one); the default filter
// leaves them out and ctest runs each as a process of its own, by --gtest_filter.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "comm/single_process_communicator.h"
#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln::comm {
namespace {

constexpr int kChunk = 100;  // the chunked world's largest MPI count
constexpr int kGuard = 3;    // poisoned elements after each output
constexpr unsigned char kPoison = 0x5A;
constexpr int64_t kOddCount = 1009;  // prime: no algorithm's block size divides it
constexpr int64_t kLargeCount = 100003;

int launcher_rank() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  return rank != nullptr ? std::atoi(rank) : 0;
}

// Every process of the job, opened by the first test that needs it.
Communicator& world() {
  static std::unique_ptr<Communicator> comm = open_mpi_world();
  return *comm;
}

// The same processes, but no MPI call moves more than kChunk elements: every transfer is cut
// into pieces, as one of more than 2^31 - 1 elements would be.
Communicator& chunked_world() {
  static std::unique_ptr<Communicator> comm = open_mpi_world(kChunk);
  return *comm;
}

Communicator& pick(bool chunked) { return chunked ? chunked_world() : world(); }

uint64_t run_seed() {
  static uint64_t seed = [] {
    uint64_t value = 0;
    if (world().rank() == 0) {
      const char* fixed = std::getenv("KILN_DIST_TEST_SEED");
      value = fixed != nullptr ? std::strtoull(fixed, nullptr, 10) : std::random_device()();
      std::printf("seed %llu (KILN_DIST_TEST_SEED=%llu repeats this run)\n",
                  static_cast<unsigned long long>(value), static_cast<unsigned long long>(value));
    }
    world().broadcast(&value, sizeof(value), 0);
    return value;
  }();
  return seed;
}

// A generator for one (case, rank): the same on every process.
std::mt19937_64 generator(const std::string& label, int rank) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a, stable across processes
  for (char c : label) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  uint64_t seed = run_seed();
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(hash), static_cast<uint32_t>(hash >> 32),
                    static_cast<uint32_t>(rank)};
  return std::mt19937_64(seq);
}

template <typename T>
std::vector<T> draw(const std::string& label, int rank, int64_t count) {
  std::mt19937_64 rng = generator(label, rank);
  // Wide integers exercise all 64 bits; floats are exact multiples of 1/8.
  int64_t bound = sizeof(T) == 8 && std::is_integral_v<T> ? (int64_t{1} << 40) : 1000;
  std::uniform_int_distribution<int64_t> dist(-bound, bound);
  std::vector<T> values(count);
  for (T& v : values) {
    int64_t k = dist(rng);
    v = std::is_integral_v<T> ? static_cast<T>(k) : static_cast<T>(k) / 8;
  }
  return values;
}

std::vector<unsigned char> draw_bytes(const std::string& label, int rank, int64_t bytes) {
  std::mt19937_64 rng = generator(label, rank);
  std::vector<unsigned char> values(bytes);
  for (unsigned char& v : values) v = static_cast<unsigned char>(rng());
  return values;
}

template <typename T>
T combine(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kSum:
      return a + b;
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kMin:
      return std::min(a, b);
  }
  return a;
}

// op over every rank's draw(label, rank, count), elements [begin, begin + n).
template <typename T>
std::vector<T> expected_reduction(const std::string& label, int size, int64_t count, int64_t begin,
                                  int64_t n, ReduceOp op) {
  std::vector<T> result;
  for (int rank = 0; rank < size; ++rank) {
    std::vector<T> values = draw<T>(label, rank, count);
    if (rank == 0) {
      result.assign(values.begin() + begin, values.begin() + begin + n);
      continue;
    }
    for (int64_t i = 0; i < n; ++i) result[i] = combine(op, result[i], values[begin + i]);
  }
  return result;
}

template <typename T>
std::vector<T> poisoned(int64_t count) {
  std::vector<T> values(count + kGuard);
  std::memset(values.data(), kPoison, values.size() * sizeof(T));
  return values;
}

// The elements of `values` from `count` on are still poison.
template <typename T>
bool guard_intact(const std::vector<T>& values, int64_t count) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = count * sizeof(T); i < values.size() * sizeof(T); ++i) {
    if (bytes[i] != kPoison) return false;
  }
  return true;
}

// The first index where `got` differs from `want`, or -1 where the first n agree.
template <typename T>
int64_t first_mismatch(const T* got, const std::vector<T>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) return i;
  }
  return -1;
}

testing::AssertionResult HasText(const std::string& message, const std::string& part) {
  if (message.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << part << "\"";
}

// Runs `call`, which must throw kiln::Error, and returns its message ("" if it did not).
template <typename F>
std::string error_of(F&& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// Calls f.template operator()<T>() with T the C++ type of dtype.
template <typename F>
void with_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::I32:
      return f.template operator()<int32_t>();
    case DType::I64:
      return f.template operator()<int64_t>();
    case DType::F32:
      return f.template operator()<float>();
    case DType::F64:
      return f.template operator()<double>();
    default:
      FAIL() << "no C++ type for " << dtype_name(dtype);
  }
}

const DType kDTypes[] = {DType::I32, DType::I64, DType::F32, DType::F64};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};

// ---------------------------------------------------------------------------------------
// The world itself.

TEST(MpiWorldTest, RanksAreTheLaunchersAndInOrder) {
  Communicator& comm = world();
  EXPECT_EQ(comm.backend_name(), "mpi");
  EXPECT_EQ(comm.rank(), launcher_rank());
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  ASSERT_NE(size, nullptr) << "run this program with mpirun";
  EXPECT_EQ(comm.size(), std::atoi(size));
  EXPECT_EQ(launched_as_several_processes(), comm.size() > 1);
  std::vector<int32_t> ranks = poisoned<int32_t>(comm.size());
  int32_t mine = comm.rank();
  comm.all_gather(&mine, ranks.data(), sizeof(mine));
  for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(ranks[r], r);
  EXPECT_TRUE(guard_intact(ranks, comm.size()));
  EXPECT_EQ(chunked_world().rank(), comm.rank());
  EXPECT_EQ(chunked_world().size(), comm.size());
}

TEST(MpiWorldTest, BarrierReturnsOnEveryRank) {
  world().barrier();
  chunked_world().barrier();
}

// ---------------------------------------------------------------------------------------
// all_reduce: every dtype and op, in place and not, plain and in pieces.

using AllReduceCase = std::tuple<DType, ReduceOp, bool /*in_place*/, int64_t, bool /*chunked*/>;
class MpiAllReduceTest : public testing::TestWithParam<AllReduceCase> {};

TEST_P(MpiAllReduceTest, MatchesTheReductionOfEveryRanksInputs) {
  auto [dtype, op, in_place, count, chunked] = GetParam();
  Communicator& comm = pick(chunked);
  std::string label = absl::StrCat("all_reduce ", dtype_name(dtype), " ", reduce_op_name(op), " ",
                                   in_place, " ", count, " ", chunked);
  with_type(dtype, [&]<typename T>() {
    std::vector<T> in = draw<T>(label, comm.rank(), count);
    std::vector<T> want = expected_reduction<T>(label, comm.size(), count, 0, count, op);
    std::vector<T> out = poisoned<T>(count);
    if (in_place) {
      std::memcpy(out.data(), in.data(), count * sizeof(T));
      comm.all_reduce(out.data(), out.data(), count, dtype, op);
    } else {
      comm.all_reduce(in.data(), out.data(), count, dtype, op);
      EXPECT_EQ(first_mismatch(in.data(), draw<T>(label, comm.rank(), count)), -1)
          << "the input changed";
    }
    int64_t bad = first_mismatch(out.data(), want);
    EXPECT_EQ(bad, -1) << "element " << bad << " of " << count << ": got "
                       << (bad >= 0 ? out[bad] : T()) << ", want " << (bad >= 0 ? want[bad] : T());
    EXPECT_TRUE(guard_intact(out, count)) << "wrote past the end";
  });
}

std::string AllReduceName(const testing::TestParamInfo<AllReduceCase>& info) {
  auto [dtype, op, in_place, count, chunked] = info.param;
  return absl::StrCat(dtype_name(dtype), "_", reduce_op_name(op), in_place ? "_InPlace" : "", "_",
                      count, chunked ? "_Chunked" : "");
}

INSTANTIATE_TEST_SUITE_P(Plain, MpiAllReduceTest,
                         testing::Combine(testing::ValuesIn(kDTypes), testing::ValuesIn(kOps),
                                          testing::Bool(),
                                          testing::Values(1, kOddCount, kLargeCount),
                                          testing::Values(false)),
                         AllReduceName);
INSTANTIATE_TEST_SUITE_P(Chunked, MpiAllReduceTest,
                         testing::Combine(testing::ValuesIn(kDTypes), testing::ValuesIn(kOps),
                                          testing::Bool(), testing::Values(kOddCount),
                                          testing::Values(true)),
                         AllReduceName);

TEST(MpiAllReduceEdgeTest, ZeroElementsTouchNothing) {
  std::vector<float> out = poisoned<float>(0);
  float in = 1;
  world().all_reduce(&in, out.data(), 0, DType::F32, ReduceOp::kSum);
  EXPECT_TRUE(guard_intact(out, 0));
}

// ---------------------------------------------------------------------------------------
// all_gather: rank order, in place (in is this rank's block of out) and not.

using AllGatherCase = std::tuple<int64_t /*bytes*/, bool /*in_place*/, bool /*chunked*/>;
class MpiAllGatherTest : public testing::TestWithParam<AllGatherCase> {};

TEST_P(MpiAllGatherTest, PlacesEveryRanksBytesInRankOrder) {
  auto [bytes, in_place, chunked] = GetParam();
  Communicator& comm = pick(chunked);
  std::string label = absl::StrCat("all_gather ", bytes, " ", in_place, " ", chunked);
  std::vector<unsigned char> in = draw_bytes(label, comm.rank(), bytes);
  std::vector<unsigned char> out = poisoned<unsigned char>(comm.size() * bytes);
  if (in_place) {
    std::copy(in.begin(), in.end(), out.begin() + comm.rank() * bytes);
    comm.all_gather(out.data() + comm.rank() * bytes, out.data(), bytes);
  } else {
    comm.all_gather(in.data(), out.data(), bytes);
  }
  for (int rank = 0; rank < comm.size(); ++rank) {
    std::vector<unsigned char> want = draw_bytes(label, rank, bytes);
    EXPECT_EQ(first_mismatch(out.data() + rank * bytes, want), -1) << "block of rank " << rank;
  }
  EXPECT_TRUE(guard_intact(out, comm.size() * bytes)) << "wrote past the end";
}

std::string AllGatherName(const testing::TestParamInfo<AllGatherCase>& info) {
  auto [bytes, in_place, chunked] = info.param;
  return absl::StrCat(bytes, "Bytes", in_place ? "_InPlace" : "", chunked ? "_Chunked" : "");
}

INSTANTIATE_TEST_SUITE_P(All, MpiAllGatherTest,
                         testing::Combine(testing::Values(0, 1, 13, kOddCount, kLargeCount),
                                          testing::Bool(), testing::Bool()),
                         AllGatherName);

// ---------------------------------------------------------------------------------------
// reduce_scatter: rank r gets op over the ranks of block r.

using ReduceScatterCase = std::tuple<DType, ReduceOp, int64_t, bool /*chunked*/>;
class MpiReduceScatterTest : public testing::TestWithParam<ReduceScatterCase> {};

TEST_P(MpiReduceScatterTest, GivesEachRankTheReductionOfItsBlock) {
  auto [dtype, op, count, chunked] = GetParam();
  Communicator& comm = pick(chunked);
  std::string label = absl::StrCat("reduce_scatter ", dtype_name(dtype), " ", reduce_op_name(op),
                                   " ", count, " ", chunked);
  int64_t total = comm.size() * count;
  with_type(dtype, [&]<typename T>() {
    std::vector<T> in = draw<T>(label, comm.rank(), total);
    std::vector<T> want =
        expected_reduction<T>(label, comm.size(), total, comm.rank() * count, count, op);
    std::vector<T> out = poisoned<T>(count);
    comm.reduce_scatter(in.data(), out.data(), count, dtype, op);
    int64_t bad = first_mismatch(out.data(), want);
    EXPECT_EQ(bad, -1) << "element " << bad << ": got " << (bad >= 0 ? out[bad] : T()) << ", want "
                       << (bad >= 0 ? want[bad] : T());
    EXPECT_TRUE(guard_intact(out, count)) << "wrote past the end";
  });
}

std::string ReduceScatterName(const testing::TestParamInfo<ReduceScatterCase>& info) {
  auto [dtype, op, count, chunked] = info.param;
  return absl::StrCat(dtype_name(dtype), "_", reduce_op_name(op), "_", count,
                      chunked ? "_Chunked" : "");
}

INSTANTIATE_TEST_SUITE_P(All, MpiReduceScatterTest,
                         testing::Combine(testing::ValuesIn(kDTypes), testing::ValuesIn(kOps),
                                          testing::Values(1, kOddCount), testing::Bool()),
                         ReduceScatterName);

// ---------------------------------------------------------------------------------------
// broadcast from every root.

using BroadcastCase = std::tuple<int64_t /*bytes*/, bool /*chunked*/>;
class MpiBroadcastTest : public testing::TestWithParam<BroadcastCase> {};

TEST_P(MpiBroadcastTest, EveryRootReachesEveryRank) {
  auto [bytes, chunked] = GetParam();
  Communicator& comm = pick(chunked);
  for (int root = 0; root < comm.size(); ++root) {
    std::string label = absl::StrCat("broadcast ", bytes, " ", chunked, " ", root);
    std::vector<unsigned char> data = poisoned<unsigned char>(bytes);
    std::vector<unsigned char> mine = draw_bytes(label, comm.rank(), bytes);
    std::memcpy(data.data(), mine.data(), bytes);  // non-roots' data must be overwritten
    comm.broadcast(data.data(), bytes, root);
    EXPECT_EQ(first_mismatch(data.data(), draw_bytes(label, root, bytes)), -1)
        << "from root " << root;
    EXPECT_TRUE(guard_intact(data, bytes)) << "from root " << root << ": wrote past the end";
  }
}

std::string BroadcastName(const testing::TestParamInfo<BroadcastCase>& info) {
  auto [bytes, chunked] = info.param;
  return absl::StrCat(bytes, "Bytes", chunked ? "_Chunked" : "");
}

INSTANTIATE_TEST_SUITE_P(All, MpiBroadcastTest,
                         testing::Combine(testing::Values(1, kOddCount, kLargeCount),
                                          testing::Bool()),
                         BroadcastName);

// ---------------------------------------------------------------------------------------
// send and recv around the ring: rank r sends to r + 1 and receives from r - 1.

using SendRecvCase = std::tuple<int64_t /*bytes*/, bool /*chunked*/>;
class MpiSendRecvTest : public testing::TestWithParam<SendRecvCase> {};

TEST_P(MpiSendRecvTest, MessagesGoAroundTheRingInOrder) {
  auto [bytes, chunked] = GetParam();
  Communicator& comm = pick(chunked);
  int next = (comm.rank() + 1) % comm.size();
  int previous = (comm.rank() + comm.size() - 1) % comm.size();
  std::string label = absl::StrCat("ring ", bytes, " ", chunked);
  // Two messages per pair: the second must not overtake the first.
  std::vector<unsigned char> first = draw_bytes(label + " first", comm.rank(), bytes);
  std::vector<unsigned char> second = draw_bytes(label + " second", comm.rank(), bytes);
  std::vector<unsigned char> got_first = poisoned<unsigned char>(bytes);
  std::vector<unsigned char> got_second = poisoned<unsigned char>(bytes);
  // Sends complete only when matched (large messages), so rank 0 sends first and every
  // other rank receives first: a chain, not a cycle of waiting senders.
  auto send_both = [&] {
    comm.send(first.data(), bytes, next);
    comm.send(second.data(), bytes, next);
  };
  auto recv_both = [&] {
    comm.recv(got_first.data(), bytes, previous);
    comm.recv(got_second.data(), bytes, previous);
  };
  if (comm.rank() == 0) {
    send_both();
    recv_both();
  } else {
    recv_both();
    send_both();
  }
  EXPECT_EQ(first_mismatch(got_first.data(), draw_bytes(label + " first", previous, bytes)), -1);
  EXPECT_EQ(first_mismatch(got_second.data(), draw_bytes(label + " second", previous, bytes)), -1);
  EXPECT_TRUE(guard_intact(got_first, bytes));
  EXPECT_TRUE(guard_intact(got_second, bytes));
}

std::string SendRecvName(const testing::TestParamInfo<SendRecvCase>& info) {
  auto [bytes, chunked] = info.param;
  return absl::StrCat(bytes, "Bytes", chunked ? "_Chunked" : "");
}

INSTANTIATE_TEST_SUITE_P(All, MpiSendRecvTest,
                         testing::Combine(testing::Values(1, kOddCount, kLargeCount),
                                          testing::Bool()),
                         SendRecvName);

// ---------------------------------------------------------------------------------------
// split: odd and even ranks, ordered by a key that reverses them.

class MpiSplitTest : public testing::TestWithParam<bool /*chunked*/> {};

TEST_P(MpiSplitTest, OddAndEvenRanksRunCollectivesOfTheirOwn) {
  Communicator& comm = pick(GetParam());
  int color = comm.rank() % 2;
  std::unique_ptr<Communicator> sub = comm.split(color, -comm.rank());
  // The members, in the order the key gives: world ranks of this parity, descending.
  std::vector<int32_t> members;
  for (int r = comm.size() - 1; r >= 0; --r) {
    if (r % 2 == color) members.push_back(r);
  }
  EXPECT_EQ(sub->size(), static_cast<int>(members.size()));  // no ASSERT: ranks stay in step
  int my_index = std::find(members.begin(), members.end(), comm.rank()) - members.begin();
  EXPECT_EQ(sub->rank(), my_index);
  EXPECT_EQ(sub->backend_name(), "mpi");

  std::vector<int32_t> gathered = poisoned<int32_t>(sub->size());
  int32_t mine = comm.rank();
  sub->all_gather(&mine, gathered.data(), sizeof(mine));
  EXPECT_EQ(first_mismatch(gathered.data(), members), -1);
  EXPECT_TRUE(guard_intact(gathered, sub->size()));

  std::vector<int64_t> sum = poisoned<int64_t>(kOddCount);
  std::vector<int64_t> in(kOddCount, comm.rank());
  sub->all_reduce(in.data(), sum.data(), kOddCount, DType::I64, ReduceOp::kSum);
  int64_t want = 0;
  for (int32_t r : members) want += r;
  EXPECT_EQ(first_mismatch(sum.data(), std::vector<int64_t>(kOddCount, want)), -1);
  EXPECT_TRUE(guard_intact(sum, kOddCount));

  int32_t root_rank = comm.rank();
  sub->broadcast(&root_rank, sizeof(root_rank), sub->size() - 1);
  EXPECT_EQ(root_rank, members.back());
  sub->barrier();
  // The world still works alongside its sub-group.
  int32_t total = 0;
  comm.all_reduce(&mine, &total, 1, DType::I32, ReduceOp::kSum);
  EXPECT_EQ(total, comm.size() * (comm.size() - 1) / 2);
}

INSTANTIATE_TEST_SUITE_P(All, MpiSplitTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "Chunked" : "Plain");
                         });

// ---------------------------------------------------------------------------------------
// Calls rejected before any message moves leave the group usable.

TEST(MpiArgumentTest, BadArgumentsThrowAndTheGroupStaysUsable) {
  Communicator& comm = world();
  float value = 1;
  EXPECT_TRUE(
      HasText(error_of([&] { comm.all_reduce(&value, &value, 1, DType::BF16, ReduceOp::kSum); }),
              "[all_reduce] dtype bf16 cannot be reduced"));
  EXPECT_TRUE(HasText(error_of([&] { comm.broadcast(&value, 4, comm.size()); }),
                      absl::StrCat("[broadcast] root ", comm.size(), " is not a rank")));
  EXPECT_TRUE(
      HasText(error_of([&] { comm.send(&value, 4, comm.rank()); }), "cannot send to itself"));
  EXPECT_TRUE(HasText(error_of([&] { comm.split(-1, 0); }), "[split] color -1 is negative"));
  comm.all_reduce(&value, &value, 1, DType::F32, ReduceOp::kSum);
  EXPECT_EQ(value, comm.size());
}

// ---------------------------------------------------------------------------------------
// Local pieces, run on every rank.

TEST(CollectiveTimeoutTest, ParsesSecondsAndNamesABadValue) {
  const char* old = std::getenv("KILN_DIST_TIMEOUT");
  std::string saved = old != nullptr ? old : "";
  unsetenv("KILN_DIST_TIMEOUT");
  EXPECT_EQ(collective_timeout().count(), 120);
  setenv("KILN_DIST_TIMEOUT", "2.5", 1);
  EXPECT_EQ(collective_timeout().count(), 2.5);
  for (const char* bad : {"soon", "0", "-3", "inf", "5s"}) {
    setenv("KILN_DIST_TIMEOUT", bad, 1);
    std::string message = error_of([] { collective_timeout(); });
    EXPECT_TRUE(HasText(message, absl::StrCat("KILN_DIST_TIMEOUT=\"", bad, "\"")));
    EXPECT_TRUE(HasText(message, "is not a positive number of seconds"));
  }
  if (old != nullptr) {
    setenv("KILN_DIST_TIMEOUT", saved.c_str(), 1);
  } else {
    unsetenv("KILN_DIST_TIMEOUT");
  }
}

TEST(ReduceOpTest, Names) {
  EXPECT_STREQ(reduce_op_name(ReduceOp::kSum), "sum");
  EXPECT_STREQ(reduce_op_name(ReduceOp::kMax), "max");
  EXPECT_STREQ(reduce_op_name(ReduceOp::kMin), "min");
}

TEST(SingleProcessCommunicatorTest, CollectivesCopyInToOut) {
  SingleProcessCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.backend_name(), "single process");
  std::vector<double> in = {1.5, -2, 3};
  std::vector<double> out = poisoned<double>(3);
  comm.all_reduce(in.data(), out.data(), 3, DType::F64, ReduceOp::kMax);
  EXPECT_EQ(first_mismatch(out.data(), in), -1);
  EXPECT_TRUE(guard_intact(out, 3));
  out = poisoned<double>(3);
  comm.reduce_scatter(in.data(), out.data(), 3, DType::F64, ReduceOp::kSum);
  EXPECT_EQ(first_mismatch(out.data(), in), -1);
  out = poisoned<double>(3);
  comm.all_gather(in.data(), out.data(), 3 * sizeof(double));
  EXPECT_EQ(first_mismatch(out.data(), in), -1);
  EXPECT_TRUE(guard_intact(out, 3));
  comm.broadcast(in.data(), 3 * sizeof(double), 0);
  comm.barrier();
  std::unique_ptr<Communicator> sub = comm.split(0, 0);
  EXPECT_EQ(sub->size(), 1);
}

TEST(SingleProcessCommunicatorTest, PointToPointAndBadArgumentsThrow) {
  SingleProcessCommunicator comm;
  char byte = 0;
  EXPECT_TRUE(HasText(error_of([&] { comm.send(&byte, 1, 1); }), "[send] this process runs alone"));
  EXPECT_TRUE(HasText(error_of([&] { comm.recv(&byte, 1, 1); }), "no peer 1 to receive from"));
  EXPECT_TRUE(HasText(error_of([&] { comm.broadcast(&byte, 1, 2); }), "[broadcast] root 2"));
  EXPECT_TRUE(
      HasText(error_of([&] { comm.all_reduce(&byte, &byte, 1, DType::Bool, ReduceOp::kSum); }),
              "[all_reduce] dtype bool cannot be reduced"));
}

// ---------------------------------------------------------------------------------------
// Failures. Each runs in a process of its own (see the file comment).

// In the failure tests, ranks that fail skip MPI_Finalize, so mpirun ends the whole job as
// soon as the first of them exits. ctest reads rank 0's verdict (the exit status is mpirun's),
// so the other ranks wait a moment before they exit and rank 0 can report first.
void let_rank_0_report_first() {
  if (launcher_rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// Run with KILN_DIST_TIMEOUT=3 under mpirun -np 2 or more: rank 1 never joins the collective.
TEST(MpiFailureTest, RankThatSkipsACollectiveTimesOutTheOthers) {
  Communicator& comm = world();
  ASSERT_GE(comm.size(), 2) << "run with mpirun -np 2 or more";
  const double timeout = collective_timeout().count();
  if (comm.rank() == 1) {
    // mpirun ends this process once the others exit: having failed, they skip
    // MPI_Finalize, and mpirun takes that for an abnormal end of the job.
    std::this_thread::sleep_for(std::chrono::duration<double>(4 * timeout));
    return;
  }
  std::vector<float> data(kOddCount, 1.0f);
  auto start = std::chrono::steady_clock::now();
  std::string message = error_of(
      [&] { comm.all_reduce(data.data(), data.data(), kOddCount, DType::F32, ReduceOp::kSum); });
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(HasText(message, absl::StrCat("[all_reduce] rank ", comm.rank(), " of ", comm.size(),
                                            " (mpi) waited ", timeout, " s for its peers")));
  const char* setting = std::getenv("KILN_DIST_TIMEOUT");
  if (setting != nullptr) {
    EXPECT_TRUE(HasText(message, absl::StrCat("(KILN_DIST_TIMEOUT=", setting, ")")));
  }
  EXPECT_TRUE(HasText(message, "a rank has died, hung, or never joined this collective"));
  EXPECT_GE(waited, timeout * 0.99);
  EXPECT_LT(waited, 2 * timeout);
  std::printf("rank %d gave up after %.2f s: %s\n", comm.rank(), waited, message.c_str());

  // The group is broken: later calls throw at once.
  start = std::chrono::steady_clock::now();
  message = error_of([&] { comm.barrier(); });
  waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(HasText(message, "[barrier] rank "));
  EXPECT_TRUE(HasText(message, "is unusable after an earlier failure: [all_reduce]"));
  EXPECT_LT(waited, 0.5);
  let_rank_0_report_first();
}

// Run with KILN_DIST_TIMEOUT=3 under mpirun -np 2 or more: rank 1 starts MPI too late.
TEST(MpiFailureTest, RankThatStartsLateTimesOutTheOthersInitialization) {
  const double timeout = collective_timeout().count();
  if (launcher_rank() == 1) {
    std::this_thread::sleep_for(std::chrono::duration<double>(4 * timeout));
    return;  // mpirun has ended the job by now, as above
  }
  auto start = std::chrono::steady_clock::now();
  std::string message = error_of([] { world(); });
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(HasText(message, absl::StrCat("[open_mpi_world] this process (started by mpirun "
                                            "as rank ",
                                            launcher_rank(), " of ")));
  EXPECT_TRUE(HasText(message, absl::StrCat("waited ", timeout, " s in MPI_Init_thread")));
  EXPECT_GE(waited, timeout * 0.99);
  EXPECT_LT(waited, 2 * timeout);
  std::printf("rank %d gave up after %.2f s: %s\n", launcher_rank(), waited, message.c_str());
  // MPI cannot be initialized twice: a second try fails at once with the first cause.
  start = std::chrono::steady_clock::now();
  EXPECT_TRUE(HasText(error_of([] { open_mpi_world(); }), "waited "));
  waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 0.5);
  let_rank_0_report_first();
}

// Run as a plain process (no mpirun): it sets the environment of a rank of two itself.
TEST(MpiFailureTest, MissingLibraryNamesThePackages) {
  setenv("KILN_MPI_LIBRARY", "/nonexistent/libmpi.so.40", 1);
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_TRUE(launched_as_several_processes());
  std::string message = error_of([] { open_mpi_world(); });
  EXPECT_TRUE(HasText(message, "[distributed] this process was started by mpirun as rank 0 of 2"))
      << "(was the library loaded by an earlier test in this process?)";
  EXPECT_TRUE(HasText(message, "libmpi.so.40 could not be loaded"));
  EXPECT_TRUE(HasText(message, "/nonexistent/libmpi.so.40"));
  EXPECT_TRUE(HasText(message, "openmpi-bin"));
  EXPECT_TRUE(HasText(message, "libopenmpi-dev"));
  EXPECT_TRUE(HasText(message, "KILN_MPI_LIBRARY"));
  std::printf("%s\n", message.c_str());
  // A second attempt fails the same way rather than crashing on a half-loaded library.
  EXPECT_TRUE(HasText(error_of([] { open_mpi_world(); }), "could not be loaded"));
}

// On ranks other than 0, only failures are printed, each naming its rank: N copies of the
// same progress report would bury them.
class FailuresOnlyPrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailuresOnlyPrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::printf("[rank %d] %s:%d: Failure\n%s\n", rank_,
                result.file_name() ? result.file_name() : "?", result.line_number(),
                result.message());
    std::fflush(stdout);
  }
  void OnTestEnd(const testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    std::printf("[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
    std::fflush(stdout);
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace kiln::comm

int main(int argc, char** argv) {
  GTEST_FLAG_SET(filter, "-MpiFailureTest.*");  // each runs alone, named by --gtest_filter
  testing::InitGoogleTest(&argc, argv);
  int rank = kiln::comm::launcher_rank();
  if (rank != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new kiln::comm::FailuresOnlyPrinter(rank));
  }
  return RUN_ALL_TESTS();
}
