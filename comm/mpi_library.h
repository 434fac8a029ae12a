// Open MPI (libmpi.so.40), opened with dlopen on first use: Kiln builds and runs where MPI is
// missing, and only a process that asks for the MPI communicator needs it.
//
// The few types, constants and entry points Kiln uses are declared here with Open MPI's ABI
// (mpi.h of Open MPI 4.x), so building Kiln needs no MPI headers. Open MPI's handles are
// pointers to opaque structs and its predefined handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM,
// ...) are the addresses of objects that libmpi exports, so they too come from dlsym. MPICH's
// ABI (integer handles) differs: its libmpi.so.12 is not a drop-in replacement.
// tests/comm/mpi_abi_test.cc pins every declaration here to the real <mpi.h>.
#ifndef KILN_COMM_MPI_LIBRARY_H_
#define KILN_COMM_MPI_LIBRARY_H_

#include <cstddef>
#include <string>

// Open MPI's opaque handle types; mpi.h declares the same tags, so these stay compatible
// with it (tests/comm/mpi_abi_test.cc checks that the handle types are identical).
struct ompi_communicator_t;
struct ompi_datatype_t;
struct ompi_errhandler_t;
struct ompi_op_t;
struct ompi_request_t;

namespace kiln::comm::mpi {

using Comm = ompi_communicator_t*;      // MPI_Comm
using Datatype = ompi_datatype_t*;      // MPI_Datatype
using Errhandler = ompi_errhandler_t*;  // MPI_Errhandler
using Op = ompi_op_t*;                  // MPI_Op
using Request = ompi_request_t*;        // MPI_Request
struct Status {                         // MPI_Status (struct ompi_status_public_t)
  int source = 0;                       // MPI_SOURCE
  int tag = 0;                          // MPI_TAG
  int error = 0;                        // MPI_ERROR
  int cancelled = 0;                    // _cancelled (Open MPI internal)
  size_t ucount = 0;                    // _ucount (Open MPI internal)
};

inline constexpr int kSuccess = 0;             // MPI_SUCCESS
inline constexpr int kThreadSingle = 0;        // MPI_THREAD_SINGLE
inline constexpr int kThreadFunneled = 1;      // MPI_THREAD_FUNNELED
inline constexpr int kThreadSerialized = 2;    // MPI_THREAD_SERIALIZED
inline constexpr int kThreadMultiple = 3;      // MPI_THREAD_MULTIPLE
inline constexpr int kMaxErrorString = 256;    // MPI_MAX_ERROR_STRING
inline constexpr int kMaxCount = 2147483647;   // INT_MAX: MPI counts are int
inline Status* const kStatusIgnore = nullptr;  // MPI_STATUS_IGNORE
// MPI_IN_PLACE: Open MPI defines it as ((void*)1). It cannot be constexpr (a cast from an
// integer), so it is a function.
inline void* in_place() { return reinterpret_cast<void*>(1); }

// The entry points (MPI_<Name> as <Name>) and predefined handles of a loaded libmpi.
struct Library {
  int (*Initialized)(int* flag);
  int (*Init_thread)(int* argc, char*** argv, int required, int* provided);
  int (*Query_thread)(int* provided);
  int (*Finalized)(int* flag);
  int (*Finalize)();
  int (*Abort)(Comm comm, int errorcode);
  int (*Comm_rank)(Comm comm, int* rank);
  int (*Comm_size)(Comm comm, int* size);
  int (*Comm_idup)(Comm comm, Comm* newcomm, Request* request);
  int (*Comm_split)(Comm comm, int color, int key, Comm* newcomm);
  int (*Comm_free)(Comm* comm);
  int (*Comm_set_errhandler)(Comm comm, Errhandler errhandler);
  int (*Iallreduce)(const void* sendbuf, void* recvbuf, int count, Datatype datatype, Op op,
                    Comm comm, Request* request);
  int (*Iallgather)(const void* sendbuf, int sendcount, Datatype sendtype, void* recvbuf,
                    int recvcount, Datatype recvtype, Comm comm, Request* request);
  int (*Ireduce_scatter_block)(const void* sendbuf, void* recvbuf, int recvcount, Datatype datatype,
                               Op op, Comm comm, Request* request);
  int (*Ireduce)(const void* sendbuf, void* recvbuf, int count, Datatype datatype, Op op, int root,
                 Comm comm, Request* request);
  int (*Ibcast)(void* buffer, int count, Datatype datatype, int root, Comm comm, Request* request);
  int (*Isend)(const void* buf, int count, Datatype datatype, int dest, int tag, Comm comm,
               Request* request);
  int (*Irecv)(void* buf, int count, Datatype datatype, int source, int tag, Comm comm,
               Request* request);
  int (*Ibarrier)(Comm comm, Request* request);
  int (*Test)(Request* request, int* flag, Status* status);
  int (*Cancel)(Request* request);
  int (*Request_free)(Request* request);
  int (*Get_count)(const Status* status, Datatype datatype, int* count);
  int (*Error_string)(int errorcode, char* string, int* resultlen);

  Comm comm_world;           // MPI_COMM_WORLD (ompi_mpi_comm_world)
  Datatype type_int;         // MPI_INT (ompi_mpi_int)
  Datatype type_int64;       // MPI_INT64_T (ompi_mpi_int64_t)
  Datatype type_float;       // MPI_FLOAT (ompi_mpi_float)
  Datatype type_double;      // MPI_DOUBLE (ompi_mpi_double)
  Datatype type_byte;        // MPI_BYTE (ompi_mpi_byte)
  Op op_sum;                 // MPI_SUM (ompi_mpi_op_sum)
  Op op_max;                 // MPI_MAX (ompi_mpi_op_max)
  Op op_min;                 // MPI_MIN (ompi_mpi_op_min)
  Errhandler errors_return;  // MPI_ERRORS_RETURN (ompi_mpi_errors_return)
  std::string path;          // what dlopen opened
};

// Opens libmpi.so.40 (or KILN_MPI_LIBRARY) on first use and resolves every entry above; the
// library stays loaded for the life of the process. Throws kiln::Error naming what is missing
// and how to install it. Thread-safe.
const Library& library();

// The MPI error's text ("MPI_ERR_TRUNCATE: message truncated"), or its code where even
// MPI_Error_string fails.
std::string error_string(const Library& mpi, int code);

// How this process was started, for error messages: "started by mpirun as rank 0 of 2", or
// "not started by an MPI launcher", read from the launchers' environment variables.
std::string launch_description();

}  // namespace kiln::comm::mpi

#endif  // KILN_COMM_MPI_LIBRARY_H_
