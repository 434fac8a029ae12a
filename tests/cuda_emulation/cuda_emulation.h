// The CUDA execution model on the host, for tests: generated kernels are compiled as C++ by
// the host compiler and run here, so their logic (indexing, grid-stride loops, block and warp
// reductions, barriers, the epilogue) is checked against the CPU backend on machines with no
// GPU. It is not a GPU: it says nothing about speed, memory ordering between blocks, or PTX.
//
// Every CUDA thread of a block is a fiber on one OS thread; a barrier or a warp
// shuffle switches to the next fiber until every live thread of the block (or warp) has
// arrived. Blocks run one after another, so `__shared__` becomes a function-local static.
// threadIdx and friends are globals set before each switch into a fiber.
#ifndef KILN_TESTS_CUDA_EMULATION_CUDA_EMULATION_H_
#define KILN_TESTS_CUDA_EMULATION_CUDA_EMULATION_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include "kiln/dtype.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

using std::erf;
using std::erfc;

inline float __int_as_float(int v) { return std::bit_cast<float>(v); }
inline float __uint_as_float(unsigned v) { return std::bit_cast<float>(v); }
inline unsigned __float_as_uint(float v) { return std::bit_cast<unsigned>(v); }
// Fibers of a launch take turns on one OS thread, so a plain read-modify-write is atomic.
inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare,
                                    unsigned long long value) {
  const unsigned long long old = *address;
  if (old == compare) *address = value;
  return old;
}
inline unsigned int atomicCAS(unsigned int* address, unsigned int compare, unsigned int value) {
  const unsigned int old = *address;
  if (old == compare) *address = value;
  return old;
}
template <class T>
T atomicAdd(T* address, T value) {
  const T old = *address;
  if constexpr (std::is_integral_v<T>) {  // wraps, as the hardware's integer add does
    *address = static_cast<T>(static_cast<unsigned long long>(old) +
                              static_cast<unsigned long long>(value));
  } else {
    *address = old + value;
  }
  return old;
}
inline long long __double_as_longlong(double v) { return std::bit_cast<long long>(v); }

// Switching fibers saves the callee-saved registers on the old stack and returns on the new
// one: a few instructions, where ucontext's swapcontext makes a system call per switch (and
// the test switches millions of times). x86-64 System V only, as the test machines are.
#if !defined(__x86_64__)
#error "the CUDA host emulation switches fibers with x86-64 assembly"
#endif
extern "C" void kiln_emulation_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .p2align 4
  .type kiln_emulation_switch, @function
kiln_emulation_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kiln_emulation_switch, .-kiln_emulation_switch
)");

namespace kiln_emulation {

inline float f16_to_f32(unsigned short h) {
  kiln::Half v;
  v.bits = h;
  return static_cast<float>(v);
}
inline unsigned short f32_to_f16(float f) { return kiln::Half(f).bits; }
inline float bf16_to_f32(unsigned short h) {
  kiln::BFloat16 v;
  v.bits = h;
  return static_cast<float>(v);
}
inline unsigned short f32_to_bf16(float f) { return kiln::BFloat16(f).bits; }

// A barrier among a group of fibers (a block or a warp). Threads that have finished no
// longer count, as on the GPU.
struct Barrier {
  int alive = 0;
  int arrived = 0;
  long generation = 0;
  void release_if_complete() {
    if (arrived > 0 && arrived >= alive) {
      arrived = 0;
      ++generation;
    }
  }
};

// A thread's cp.async copies not yet done: issued in order, closed into groups by commit.
// They land when a wait_group lets them (the latest moment PTX allows), so a kernel that
// reads shared memory before waiting reads stale data here too.
struct AsyncCopy {
  void* dst;
  const void* src;
  int src_bytes;
};
struct AsyncCopies {
  std::vector<AsyncCopy> copies;
  std::vector<size_t> group_ends;  // per committed group, copies.size() at its commit
};

struct Fiber {
  void* sp = nullptr;  // its saved stack pointer while switched out
  bool finished = false;
  AsyncCopies async;
};

// One block's run: the fibers, the scheduler's context and the barriers.
struct BlockRun {
  void* scheduler = nullptr;  // the scheduler's saved stack pointer
  std::vector<Fiber> fibers;
  std::vector<std::unique_ptr<char[]>> stacks;
  int current = 0;
  Barrier block;
  std::vector<Barrier> warps;
  std::vector<uint64_t> lanes;         // a shuffle's values, 32 per warp
  std::vector<double> dynamic_shared;  // the launch's dynamic shared memory (8-byte aligned)
  unsigned dynamic_shared_bytes = 0;
  const std::function<void()>* kernel = nullptr;
};

inline BlockRun* run = nullptr;
// What the kernels run so far did, for tests that must know a path was taken.
struct Counters {
  long long cp_async_copies = 0;
  long long ldmatrix_loads = 0;
};
inline Counters counters;

// Stops the process with a message: what a GPU would report as a fault (a misaligned
// address), or a kernel's misuse of a collective.
[[noreturn]] inline void fault(const char* what) {
  std::fprintf(stderr, "CUDA emulation: %s\n", what);
  std::abort();
}
inline constexpr size_t kStackBytes = 256 * 1024;

inline void yield() { kiln_emulation_switch(&run->fibers[run->current].sp, run->scheduler); }

inline void wait_at(Barrier& b) {
  const long generation = b.generation;
  ++b.arrived;
  b.release_if_complete();
  while (b.generation == generation) yield();
}

// A fiber's first frame: runs the kernel, leaves its barriers, and never returns.
inline void fiber_main() {
  (*run->kernel)();
  run->fibers[run->current].finished = true;
  run->block.alive -= 1;
  run->block.release_if_complete();
  Barrier& warp = run->warps[run->current / 32];
  warp.alive -= 1;
  warp.release_if_complete();
  void* unused = nullptr;
  kiln_emulation_switch(&unused, run->scheduler);
}

// A new fiber's stack: six zero registers for kiln_emulation_switch to pop, then fiber_main
// as the address it returns to, aligned as if fiber_main had been called.
inline void* new_fiber_stack(char* stack, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  // An earlier fiber's frames never unwound (fibers end by switching away), so their
  // redzones are still poisoned: the stack starts clean.
  __asan_unpoison_memory_region(stack, bytes);
#endif
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t{15};
  auto* sp = reinterpret_cast<void**>(top) - 8;
  for (int i = 0; i < 6; ++i) sp[i] = nullptr;
  sp[6] = reinterpret_cast<void*>(&fiber_main);
  sp[7] = nullptr;  // fiber_main's return address: it never returns
  return sp;
}

// Runs `kernel` over the grid: every block in turn, each block's threads as fibers.
inline void launch(long long grid_x, long long grid_y, int block, unsigned shared_bytes,
                   const std::function<void()>& kernel) {
  BlockRun r;
  r.kernel = &kernel;
  r.dynamic_shared_bytes = shared_bytes;
  r.fibers.resize(block);
  for (int t = 0; t < block; ++t) r.stacks.emplace_back(new char[kStackBytes]);
  r.warps.resize((block + 31) / 32);
  r.lanes.assign(r.warps.size() * 32, 0);
  BlockRun* outer = run;
  run = &r;
  gridDim = dim3{static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), 1};
  blockDim = dim3{static_cast<unsigned>(block), 1, 1};
  for (long long b = 0; b < grid_x * grid_y; ++b) {
    blockIdx = dim3{static_cast<unsigned>(b % grid_x), static_cast<unsigned>(b / grid_x), 1};
    // Shared memory starts as garbage on a GPU: poison it (NaN bits) for every block.
    r.dynamic_shared.assign((shared_bytes + 7) / 8, std::bit_cast<double>(~uint64_t{0}));
    r.block = Barrier{block, 0, 0};
    for (size_t w = 0; w < r.warps.size(); ++w) {
      r.warps[w] = Barrier{std::min(32, block - static_cast<int>(w) * 32), 0, 0};
    }
    for (int t = 0; t < block; ++t) {
      r.fibers[t] = Fiber{new_fiber_stack(r.stacks[t].get(), kStackBytes), false};
    }
    // Round robin until every thread has returned; a thread runs until it waits or ends.
    for (bool any = true; any;) {
      any = false;
      for (int t = 0; t < block; ++t) {
        if (r.fibers[t].finished) continue;
        any = true;
        r.current = t;
        threadIdx = dim3{static_cast<unsigned>(t), 1, 1};
        kiln_emulation_switch(&r.scheduler, r.fibers[t].sp);
      }
    }
  }
  run = outer;
}

// A warp shuffle: every lane publishes its value, the warp meets, each reads its source lane.
template <class T, class SourceLane>
T shuffle(T value, SourceLane source_lane) {
  static_assert(sizeof(T) <= 8);
  const int t = run->current, warp = t / 32, lane = t % 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  run->lanes[warp * 32 + lane] = bits;
  wait_at(run->warps[warp]);
  const int width = run->warps[warp].alive;
  const int source = source_lane(lane);
  T out = value;
  if (source >= 0 && source < width) std::memcpy(&out, &run->lanes[warp * 32 + source], sizeof(T));
  wait_at(run->warps[warp]);  // nobody overwrites a lane before everyone has read it
  return out;
}

// mma.sync.m16n8k16.row.col with f32 accumulators: the warp's lanes publish their
// fragments, then each lane computes its four accumulators from the whole A (16x16) and B
// (16x8), finding each element's lane and register by PTX's fragment layout (the inverse of
// the one the generated kernel loads with: a test of both against the CPU).
inline void mma_16816(float c[4], const unsigned a[4], const unsigned b[2], bool bf16) {
  const int t = run->current, warp = t / 32, lane = t % 32;
  static std::vector<unsigned> regs;  // 6 per lane of the warp: a0..a3, b0, b1
  regs.resize(static_cast<size_t>(run->warps.size()) * 32 * 6);
  unsigned* mine = &regs[(warp * 32 + lane) * 6];
  for (int i = 0; i < 4; ++i) mine[i] = a[i];
  for (int i = 0; i < 2; ++i) mine[4 + i] = b[i];
  wait_at(run->warps[warp]);
  auto element = [&](int holder, int reg, int half) {
    const unsigned bits = regs[(warp * 32 + holder) * 6 + reg];
    const auto h = static_cast<unsigned short>(half ? bits >> 16 : bits & 0xffff);
    return bf16 ? bf16_to_f32(h) : f16_to_f32(h);
  };
  // A(row, col) is a_i of lane (row % 8) * 4 + (col % 8) / 2, i = (col & 1) + 2 * (row >= 8)
  // + 4 * (col >= 8); B(k, n) is b_i of lane n * 4 + (k % 8) / 2, i = (k & 1) + 2 * (k >= 8).
  auto a_at = [&](int row, int col) {
    const int i = (col & 1) + (row >= 8 ? 2 : 0) + (col >= 8 ? 4 : 0);
    return element((row % 8) * 4 + (col % 8) / 2, i / 2, i & 1);
  };
  auto b_at = [&](int k, int n) {
    const int i = (k & 1) + (k >= 8 ? 2 : 0);
    return element(n * 4 + (k % 8) / 2, 4 + i / 2, i & 1);
  };
  const int group = lane / 4, thread_in_group = lane % 4;
  float d[4];
  for (int i = 0; i < 4; ++i) {
    const int row = group + (i >= 2 ? 8 : 0), col = thread_in_group * 2 + (i & 1);
    float sum = c[i];
    for (int k = 0; k < 16; ++k) sum += a_at(row, k) * b_at(k, col);
    d[i] = sum;
  }
  wait_at(run->warps[warp]);  // every lane has read the fragments before any is replaced
  for (int i = 0; i < 4; ++i) c[i] = d[i];
}

// dp4a.u32.s32: four unsigned bytes of a times four signed bytes of b, plus c.
inline int dp4a_u8_s8(unsigned a, unsigned b, int c) {
  for (int i = 0; i < 4; ++i) {
    c += static_cast<int>((a >> (8 * i)) & 0xFF) * static_cast<int8_t>((b >> (8 * i)) & 0xFF);
  }
  return c;
}

// cp.async.cg.shared.global [dst], [src], 16, src_bytes: both addresses 16-byte aligned;
// the first src_bytes bytes come from src, the rest of the 16 are zeros. Queued until a
// wait_group completes its group.
inline void cp_async_16(void* dst, const void* src, int src_bytes) {
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0) {
    fault("cp.async of 16 bytes from or to an address that is not 16-byte aligned");
  }
  if (src_bytes < 0 || src_bytes > 16) fault("cp.async src-size outside 0..16");
  run->fibers[run->current].async.copies.push_back({dst, src, src_bytes});
  ++counters.cp_async_copies;
}

// cp.async.commit_group: the thread's copies issued since its last commit form a group
// (possibly empty).
inline void cp_async_commit() {
  AsyncCopies& a = run->fibers[run->current].async;
  a.group_ends.push_back(a.copies.size());
}

// cp.async.wait_group n: the thread's committed groups but the newest n are complete.
inline void cp_async_wait(int n) {
  AsyncCopies& a = run->fibers[run->current].async;
  const size_t groups = a.group_ends.size();
  if (groups <= static_cast<size_t>(n)) return;
  const size_t done = a.group_ends[groups - n - 1];
  for (size_t i = 0; i < done; ++i) {
    const AsyncCopy& c = a.copies[i];
    std::memcpy(c.dst, c.src, c.src_bytes);
    std::memset(static_cast<char*>(c.dst) + c.src_bytes, 0, 16 - c.src_bytes);
  }
  a.copies.erase(a.copies.begin(), a.copies.begin() + done);
  a.group_ends.erase(a.group_ends.begin(), a.group_ends.begin() + (groups - n));
  for (size_t& end : a.group_ends) end -= done;
}

// ldmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16, count 1, 2 or 4: a warp
// collective. Lane 8i + r gives the address of row r of matrix i (8 elements, 16 bytes,
// 16-byte aligned; lanes from 8 * count on give none that is read). Lane l receives in
// regs[i] two elements of matrix i, the lower one in the low half: row l / 4, columns
// 2 (l % 4) and 2 (l % 4) + 1; with .trans, column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1.
inline void ldmatrix(unsigned* regs, int count, bool trans, const void* row) {
  if (count != 1 && count != 2 && count != 4) fault("ldmatrix takes 1, 2 or 4 matrices");
  const int t = run->current, warp = t / 32, lane = t % 32;
  if (run->warps[warp].alive != 32) fault("ldmatrix needs every lane of the warp");
  run->lanes[warp * 32 + lane] = reinterpret_cast<uintptr_t>(row);
  wait_at(run->warps[warp]);
  auto element = [&](int matrix, int r, int c) {
    const uint64_t address = run->lanes[warp * 32 + matrix * 8 + r];
    if (address % 16 != 0) fault("ldmatrix row address not 16-byte aligned");
    unsigned short v;
    std::memcpy(&v, reinterpret_cast<const unsigned short*>(address) + c, sizeof(v));
    return static_cast<unsigned>(v);
  };
  const int g = lane / 4, c = 2 * (lane % 4);
  unsigned out[4];
  for (int i = 0; i < count; ++i) {
    const unsigned lo = trans ? element(i, c, g) : element(i, g, c);
    const unsigned hi = trans ? element(i, c + 1, g) : element(i, g, c + 1);
    out[i] = lo | (hi << 16);
  }
  wait_at(run->warps[warp]);  // nobody publishes a new address before everyone has read
  for (int i = 0; i < count; ++i) regs[i] = out[i];
  ++counters.ldmatrix_loads;
}

inline unsigned dynamic_shared_bytes() { return run->dynamic_shared_bytes; }
inline void* dynamic_shared() { return run->dynamic_shared.data(); }

}  // namespace kiln_emulation

inline void __syncthreads() { kiln_emulation::wait_at(kiln_emulation::run->block); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  kiln_emulation::wait_at(kiln_emulation::run->warps[kiln_emulation::run->current / 32]);
}
template <class T>
T __shfl_down_sync(unsigned, T v, int delta) {
  return kiln_emulation::shuffle(v, [delta](int lane) { return lane + delta; });
}
template <class T>
T __shfl_up_sync(unsigned, T v, int delta) {
  return kiln_emulation::shuffle(v, [delta](int lane) { return lane - delta; });
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask) {
  return kiln_emulation::shuffle(v, [mask](int lane) { return lane ^ mask; });
}
template <class T>
T __shfl_sync(unsigned, T v, int source) {
  return kiln_emulation::shuffle(v, [source](int) { return source; });
}

#endif  // KILN_TESTS_CUDA_EMULATION_CUDA_EMULATION_H_
