// The LAPACK routines kiln::linalg runs, from the machine's LAPACK, opened with dlopen on
// first use: OpenBLAS's (libopenblas.so.0, which carries LAPACK) where it is installed, else
// the reference LAPACK (liblapack.so.3); KILN_LAPACK_LIBRARY names another. Nothing else in
// Kiln needs LAPACK, so an application that embeds Kiln and never calls linalg does not
// carry it; without one, a linalg op is an error that says what to install. LAPACK is
// column-major; linalg_decompositions.cc says how each row-major operand is handed over.
//
// The entry points are LAPACK's Fortran ones, as its reference documents them: every
// argument goes by address, and a CHARACTER argument has a hidden length after the last
// argument (gfortran's convention), which is passed so that routines built from Fortran read
// what they expect. Both libraries use 32-bit integers (libopenblas, not libopenblas64).
#ifndef KILN_JIT_API_LAPACK_H_
#define KILN_JIT_API_LAPACK_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace kiln::linalg::lapack {

// The routines, resolved from the loaded library.
template <class S>
struct Routines {
  void (*getrf)(const int* m, const int* n, S* a, const int* lda, int* ipiv, int* info);
  void (*getrs)(const char* trans, const int* n, const int* nrhs, const S* a, const int* lda,
                const int* ipiv, S* b, const int* ldb, int* info, std::size_t trans_length);
  void (*potrf)(const char* uplo, const int* n, S* a, const int* lda, int* info,
                std::size_t uplo_length);
  void (*geqrf)(const int* m, const int* n, S* a, const int* lda, S* tau, S* work, const int* lwork,
                int* info);
  void (*orgqr)(const int* m, const int* n, const int* k, S* a, const int* lda, const S* tau,
                S* work, const int* lwork, int* info);
  void (*syevd)(const char* jobz, const char* uplo, const int* n, S* a, const int* lda, S* w,
                S* work, const int* lwork, int* iwork, const int* liwork, int* info,
                std::size_t jobz_length, std::size_t uplo_length);
};

// The workspace syevd('V') runs with: what its query said (a count held in the value type,
// which in f32 rounds below the true count once it passes 2^24), raised to LAPACK's
// documented minimum of 1 + 6n + 2n^2 values and 3 + 5n integers. nullopt when either is
// more than a 32-bit count (n above about 32766).
struct SyevdWorkspace {
  int work = 1, iwork = 1;
};
std::optional<SyevdWorkspace> syevd_workspace(int n, double queried_work, int queried_iwork);

// A loaded LAPACK: its path and routines.
struct Library {
  std::string path;
  Routines<float> single;
  Routines<double> double_precision;
};

// Opens the first of `paths` that dlopen loads and resolves every routine from it; a
// kiln::Error naming `op`, the paths tried and what to install when none loads, or when the
// one that loads lacks a routine.
Library open_library(const char* op, const std::vector<std::string>& paths);

// Loads LAPACK if it is not loaded yet (open_library with KILN_LAPACK_LIBRARY, which is then
// the only library tried, else libopenblas.so.0 then liblapack.so.3), for the rest of the
// process. OpenBLAS is told to use as many threads as the CPU device (KILN_NUM_THREADS), so
// the two do not oversubscribe the cores. Every linalg op calls it first.
void load(const char* op);
// The path of the library loaded ("" before load succeeds).
const std::string& library_path();

template <class S>
const Routines<S>& routines();
template <>
const Routines<float>& routines<float>();
template <>
const Routines<double>& routines<double>();

// Each returns LAPACK's INFO: 0 on success, -i when argument i was wrong, and a positive value
// the routine documents (getrf: U(info, info) is exactly zero; potrf: the leading minor of
// order info is not positive definite; syevd: the algorithm did not converge).

template <class S>
int getrf(int m, int n, S* a, int lda, int* ipiv) {
  int info = 0;
  routines<S>().getrf(&m, &n, a, &lda, ipiv, &info);
  return info;
}

template <class S>
int getrs(char trans, int n, int nrhs, const S* a, int lda, const int* ipiv, S* b, int ldb) {
  int info = 0;
  routines<S>().getrs(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, &info, 1);
  return info;
}

template <class S>
int potrf(char uplo, int n, S* a, int lda) {
  int info = 0;
  routines<S>().potrf(&uplo, &n, a, &lda, &info, 1);
  return info;
}

// lwork == -1 asks for the best workspace size, written to work[0].
template <class S>
int geqrf(int m, int n, S* a, int lda, S* tau, S* work, int lwork) {
  int info = 0;
  routines<S>().geqrf(&m, &n, a, &lda, tau, work, &lwork, &info);
  return info;
}

template <class S>
int orgqr(int m, int n, int k, S* a, int lda, const S* tau, S* work, int lwork) {
  int info = 0;
  routines<S>().orgqr(&m, &n, &k, a, &lda, tau, work, &lwork, &info);
  return info;
}

// lwork == -1 and liwork == -1 ask for the best sizes, written to work[0] and iwork[0].
template <class S>
int syevd(char jobz, char uplo, int n, S* a, int lda, S* w, S* work, int lwork, int* iwork,
          int liwork) {
  int info = 0;
  routines<S>().syevd(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, &info, 1, 1);
  return info;
}

}  // namespace kiln::linalg::lapack

#endif  // KILN_JIT_API_LAPACK_H_
