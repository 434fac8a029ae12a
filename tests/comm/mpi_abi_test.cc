// Pins Kiln's hand-written Open MPI declarations (comm/mpi_library.h) to the
// real <mpi.h>: the constants, the handle types, MPI_Status's layout and the entry points'
// signatures at compile time, and the predefined handles that Kiln resolves with dlsym
// against mpi.h's MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, ... at run time. Built only where
// mpi.h is found, and linked with libmpi (Kiln itself never is).
#include <gtest/gtest.h>
// The C API only: Open MPI's deprecated C++ bindings would need libmpi_cxx.
#ifndef OMPI_SKIP_MPICXX  // FindMPI's MPI::MPI_CXX defines it already
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstddef>
#include <type_traits>

#include "comm/mpi_library.h"

namespace kiln::comm::mpi {
namespace {

static_assert(kSuccess == MPI_SUCCESS);
static_assert(kThreadSingle == MPI_THREAD_SINGLE);
static_assert(kThreadFunneled == MPI_THREAD_FUNNELED);
static_assert(kThreadSerialized == MPI_THREAD_SERIALIZED);
static_assert(kThreadMultiple == MPI_THREAD_MULTIPLE);
static_assert(kMaxErrorString == MPI_MAX_ERROR_STRING);

static_assert(std::is_same_v<Comm, MPI_Comm>);
static_assert(std::is_same_v<Datatype, MPI_Datatype>);
static_assert(std::is_same_v<Errhandler, MPI_Errhandler>);
static_assert(std::is_same_v<Op, MPI_Op>);
static_assert(std::is_same_v<Request, MPI_Request>);

static_assert(sizeof(Status) == sizeof(MPI_Status));
static_assert(alignof(Status) == alignof(MPI_Status));
static_assert(offsetof(Status, source) == offsetof(MPI_Status, MPI_SOURCE));
static_assert(offsetof(Status, tag) == offsetof(MPI_Status, MPI_TAG));
static_assert(offsetof(Status, error) == offsetof(MPI_Status, MPI_ERROR));
static_assert(offsetof(Status, cancelled) == offsetof(MPI_Status, _cancelled));
static_assert(offsetof(Status, ucount) == offsetof(MPI_Status, _ucount));

// Each entry point's pointer type is exactly that of mpi.h's function. MPI_Test and
// MPI_Get_count take Kiln's Status (a distinct but layout-identical type, checked above).
#define KILN_SAME_SIGNATURE(name) \
  static_assert(std::is_same_v<decltype(Library::name), decltype(&MPI_##name)>, #name)
KILN_SAME_SIGNATURE(Initialized);
KILN_SAME_SIGNATURE(Init_thread);
KILN_SAME_SIGNATURE(Query_thread);
KILN_SAME_SIGNATURE(Finalized);
KILN_SAME_SIGNATURE(Finalize);
KILN_SAME_SIGNATURE(Abort);
KILN_SAME_SIGNATURE(Comm_rank);
KILN_SAME_SIGNATURE(Comm_size);
KILN_SAME_SIGNATURE(Comm_idup);
KILN_SAME_SIGNATURE(Comm_split);
KILN_SAME_SIGNATURE(Comm_free);
KILN_SAME_SIGNATURE(Comm_set_errhandler);
KILN_SAME_SIGNATURE(Iallreduce);
KILN_SAME_SIGNATURE(Iallgather);
KILN_SAME_SIGNATURE(Ireduce_scatter_block);
KILN_SAME_SIGNATURE(Ireduce);
KILN_SAME_SIGNATURE(Ibcast);
KILN_SAME_SIGNATURE(Isend);
KILN_SAME_SIGNATURE(Irecv);
KILN_SAME_SIGNATURE(Ibarrier);
KILN_SAME_SIGNATURE(Cancel);
KILN_SAME_SIGNATURE(Request_free);
KILN_SAME_SIGNATURE(Error_string);
#undef KILN_SAME_SIGNATURE
static_assert(std::is_same_v<decltype(Library::Test), int (*)(Request*, int*, Status*)>);
static_assert(std::is_same_v<decltype(&MPI_Test), int (*)(MPI_Request*, int*, MPI_Status*)>);
static_assert(std::is_same_v<decltype(Library::Get_count), int (*)(const Status*, Datatype, int*)>);
static_assert(
    std::is_same_v<decltype(&MPI_Get_count), int (*)(const MPI_Status*, MPI_Datatype, int*)>);

TEST(MpiAbiTest, PointerConstantsMatchTheHeader) {
  EXPECT_EQ(in_place(), MPI_IN_PLACE);
  EXPECT_EQ(static_cast<void*>(kStatusIgnore), static_cast<void*>(MPI_STATUS_IGNORE));
}

// The handles Kiln resolves by name are the very objects that mpi.h's macros name (and that
// libmpi itself uses), also where the executable holds copies of them (copy relocations).
TEST(MpiAbiTest, ResolvedHandlesAreTheHeadersPredefinedHandles) {
  const Library& mpi = library();
  EXPECT_EQ(mpi.comm_world, MPI_COMM_WORLD);
  EXPECT_EQ(mpi.type_int, MPI_INT);
  EXPECT_EQ(mpi.type_int64, MPI_INT64_T);
  EXPECT_EQ(mpi.type_float, MPI_FLOAT);
  EXPECT_EQ(mpi.type_double, MPI_DOUBLE);
  EXPECT_EQ(mpi.type_byte, MPI_BYTE);
  EXPECT_EQ(mpi.op_sum, MPI_SUM);
  EXPECT_EQ(mpi.op_max, MPI_MAX);
  EXPECT_EQ(mpi.op_min, MPI_MIN);
  EXPECT_EQ(mpi.errors_return, MPI_ERRORS_RETURN);
}

// The dtypes Kiln maps to these handles have the sizes MPI gives them.
TEST(MpiAbiTest, DatatypeSizesMatchKilnsDtypes) {
  const Library& mpi = library();
  int initialized = 0;
  mpi.Initialized(&initialized);
  if (!initialized) {
    ASSERT_EQ(MPI_Init(nullptr, nullptr), MPI_SUCCESS);
  }
  int size = 0;
  MPI_Type_size(mpi.type_int, &size);
  EXPECT_EQ(size, 4);
  MPI_Type_size(mpi.type_int64, &size);
  EXPECT_EQ(size, 8);
  MPI_Type_size(mpi.type_float, &size);
  EXPECT_EQ(size, 4);
  MPI_Type_size(mpi.type_double, &size);
  EXPECT_EQ(size, 8);
  MPI_Type_size(mpi.type_byte, &size);
  EXPECT_EQ(size, 1);
  MPI_Finalize();
}

}  // namespace
}  // namespace kiln::comm::mpi
