// Loading Open MPI with dlopen and resolving the subset of its API that Kiln uses.
#include "comm/mpi_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"

namespace kiln::comm::mpi {
namespace {

constexpr char kDefaultLibrary[] = "libmpi.so.40";
constexpr char kHowToInstall[] =
    "install Debian's openmpi-bin and libopenmpi-dev (Open MPI 4.x), or set KILN_MPI_LIBRARY "
    "to the path of Open MPI's libmpi.so.40";

const char* env_or_null(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

std::string dlerror_text() {
  const char* text = dlerror();
  return text != nullptr ? text : "no reason given";
}

// Resolves one exported symbol or throws naming it: a libmpi that lacks one of these is not
// Open MPI 4.x (MPICH's libmpi exports MPI_* but none of the ompi_mpi_* objects).
void* resolve(void* handle, const std::string& path, const char* symbol) {
  dlerror();
  void* address = dlsym(handle, symbol);
  if (address == nullptr) {
    throw Error(absl::StrCat("[distributed] ", path, " was loaded but does not export ", symbol,
                             " (", dlerror_text(),
                             "): Kiln needs Open MPI 4.x's ABI (libmpi.so.40); ", kHowToInstall));
  }
  return address;
}

template <typename T>
void resolve_into(T& field, void* handle, const std::string& path, const char* symbol) {
  field = reinterpret_cast<T>(resolve(handle, path, symbol));
}

void resolve_functions(Library& mpi, void* handle) {
  const std::string& p = mpi.path;
  resolve_into(mpi.Initialized, handle, p, "MPI_Initialized");
  resolve_into(mpi.Init_thread, handle, p, "MPI_Init_thread");
  resolve_into(mpi.Query_thread, handle, p, "MPI_Query_thread");
  resolve_into(mpi.Finalized, handle, p, "MPI_Finalized");
  resolve_into(mpi.Finalize, handle, p, "MPI_Finalize");
  resolve_into(mpi.Abort, handle, p, "MPI_Abort");
  resolve_into(mpi.Comm_rank, handle, p, "MPI_Comm_rank");
  resolve_into(mpi.Comm_size, handle, p, "MPI_Comm_size");
  resolve_into(mpi.Comm_idup, handle, p, "MPI_Comm_idup");
  resolve_into(mpi.Comm_split, handle, p, "MPI_Comm_split");
  resolve_into(mpi.Comm_free, handle, p, "MPI_Comm_free");
  resolve_into(mpi.Comm_set_errhandler, handle, p, "MPI_Comm_set_errhandler");
  resolve_into(mpi.Iallreduce, handle, p, "MPI_Iallreduce");
  resolve_into(mpi.Iallgather, handle, p, "MPI_Iallgather");
  resolve_into(mpi.Ireduce_scatter_block, handle, p, "MPI_Ireduce_scatter_block");
  resolve_into(mpi.Ireduce, handle, p, "MPI_Ireduce");
  resolve_into(mpi.Ibcast, handle, p, "MPI_Ibcast");
  resolve_into(mpi.Isend, handle, p, "MPI_Isend");
  resolve_into(mpi.Irecv, handle, p, "MPI_Irecv");
  resolve_into(mpi.Ibarrier, handle, p, "MPI_Ibarrier");
  resolve_into(mpi.Test, handle, p, "MPI_Test");
  resolve_into(mpi.Cancel, handle, p, "MPI_Cancel");
  resolve_into(mpi.Request_free, handle, p, "MPI_Request_free");
  resolve_into(mpi.Get_count, handle, p, "MPI_Get_count");
  resolve_into(mpi.Error_string, handle, p, "MPI_Error_string");
}

// The predefined handles are the addresses of libmpi's exported objects (mpi.h's
// OMPI_PREDEFINED_GLOBAL), so the symbol's address is the handle itself. They are looked up
// in the global scope (RTLD_DEFAULT), not in libmpi alone: an executable that links libmpi
// and names MPI_COMM_WORLD holds a copy of the object (a copy relocation), and libmpi then
// uses that copy, not its own, which is left unused (tests/comm/mpi_abi_test.cc caught this).
void resolve_handles(Library& mpi) {
  const std::string& p = mpi.path;
  resolve_into(mpi.comm_world, RTLD_DEFAULT, p, "ompi_mpi_comm_world");
  resolve_into(mpi.type_int, RTLD_DEFAULT, p, "ompi_mpi_int");
  resolve_into(mpi.type_int64, RTLD_DEFAULT, p, "ompi_mpi_int64_t");
  resolve_into(mpi.type_float, RTLD_DEFAULT, p, "ompi_mpi_float");
  resolve_into(mpi.type_double, RTLD_DEFAULT, p, "ompi_mpi_double");
  resolve_into(mpi.type_byte, RTLD_DEFAULT, p, "ompi_mpi_byte");
  resolve_into(mpi.op_sum, RTLD_DEFAULT, p, "ompi_mpi_op_sum");
  resolve_into(mpi.op_max, RTLD_DEFAULT, p, "ompi_mpi_op_max");
  resolve_into(mpi.op_min, RTLD_DEFAULT, p, "ompi_mpi_op_min");
  resolve_into(mpi.errors_return, RTLD_DEFAULT, p, "ompi_mpi_errors_return");
}

Library load() {
  Library mpi{};
  const char* override_path = env_or_null("KILN_MPI_LIBRARY");
  mpi.path = override_path != nullptr ? override_path : kDefaultLibrary;
  // RTLD_GLOBAL: Open MPI's plugins (mca_*.so), which it dlopens itself, resolve their
  // references to libmpi and libopen-pal through the global namespace.
  void* handle = dlopen(mpi.path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    std::string launched = launch_description();
    throw Error(absl::StrCat("[distributed] this process was ", launched,
                             ", but Open MPI's library ", mpi.path, " could not be loaded (",
                             dlerror_text(), "): ", kHowToInstall));
  }
  // The handle is never closed: MPI cannot be initialized twice in a process, so the library
  // must outlive every communicator and the finalization at exit.
  resolve_functions(mpi, handle);
  resolve_handles(mpi);  // RTLD_GLOBAL put libmpi in the global scope
  return mpi;
}

}  // namespace

const Library& library() {
  // Guarded by hand rather than by a function-local static so that a failed load (thrown
  // from the initializer) is retried with the current environment on the next call.
  static std::mutex mutex;
  static const Library* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded == nullptr) loaded = new Library(load());  // lives as long as the process
  return *loaded;
}

std::string error_string(const Library& mpi, int code) {
  char text[kMaxErrorString + 1] = {};
  int length = 0;
  if (mpi.Error_string(code, text, &length) != kSuccess || length <= 0) {
    return absl::StrCat("MPI error code ", code);
  }
  return absl::StrCat(std::string(text, length), " (MPI error code ", code, ")");
}

std::string launch_description() {
  // Open MPI's mpirun, then PMI-1/2 launchers (MPICH's hydra, srun --mpi=pmi2), then PMIx.
  const char* launchers[][3] = {
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"a PMI launcher", "PMI_RANK", "PMI_SIZE"},
      {"a PMIx launcher", "PMIX_RANK", "SLURM_STEP_NUM_TASKS"},
  };
  for (const auto& [launcher, rank_name, size_name] : launchers) {
    const char* rank = env_or_null(rank_name);
    const char* size = env_or_null(size_name);
    if (rank == nullptr && size == nullptr) continue;
    return absl::StrCat("started by ", launcher, " as rank ", rank ? rank : "?", " of ",
                        size ? size : "?");
  }
  return "not started by an MPI launcher";
}

}  // namespace kiln::comm::mpi
