// The emulated GPU threads of one block as cooperative fibers on the launching host thread
// (kernel_host.hpp runs every block through run_fibers()). A fiber runs until it waits (a
// barrier, a warp collective, an mbarrier) or exits; the next ready one then runs. So a barrier
// costs a stack switch of a few nanoseconds where a std::thread per emulated thread cost the OS
// a context switch for every lane at every warp collective (on CI's two cores that was most of
// the host kernel tests' time, and half of it was the kernel's), and a block whose threads all
// wait is a deadlock found at once instead of a timeout.
// - The schedule is the same every run, and depth first: the threads start in index order,
//   ascending or (the flipped copy mode's) descending, and the threads a barrier releases resume
//   at once, in the order they reached it, ahead of every other ready thread. So a warp runs on
//   through its own collectives until it waits for the block, and the block's warps run their
//   stretches between block barriers one after another: a warp that reads what another writes
//   with no block barrier between them reads it stale under one of the two orders (where the
//   result can show it; TSan reports it under both).
// - Lagging threads (kernel_host.hpp's Lag) run only while no other thread is ready, so the rest
//   of the block runs as far ahead as its barriers let it.
// - ThreadSanitizer (test_kernel_races) sees each fiber as a thread of its own and is told of
//   every switch without an ordering: the emulator states the orderings the GPU has (Meeting,
//   mbarriers), and a fiber's start and end are ordered after the launch and before its return.
// - AddressSanitizer is told of every switch, so it knows which stack is live.
// Stacks are switched by a few lines of x86-64 assembly (callee-saved registers, MXCSR and the x87
// control word); elsewhere by ucontext, which costs a signal-mask system call per switch and
// which ASan intercepts (define ATTNFUSE_HOST_FIBERS_UCONTEXT to take it on x86-64 too).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#if !defined(__x86_64__) && !defined(ATTNFUSE_HOST_FIBERS_UCONTEXT)
#define ATTNFUSE_HOST_FIBERS_UCONTEXT 1
#endif
#if defined(ATTNFUSE_HOST_FIBERS_UCONTEXT)
#include <ucontext.h>
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
extern "C" {
void AnnotateIgnoreSyncBegin(const char* file, int line);
void AnnotateIgnoreSyncEnd(const char* file, int line);
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
}
#endif
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(ATTNFUSE_HOST_FIBERS_UCONTEXT)
// attnfuse_host_switch(save, load): pushes the callee-saved registers, stores the stack pointer
// at *save, continues on stack `load` (as left by a switch away from it, or made by
// fiber_detail::worker) and pops its registers. Weak: every test file that includes this emits it.
extern "C" void attnfuse_host_switch(void** save, void* load);
extern "C" void attnfuse_host_fiber_entry();
asm(R"(
  .text
  .p2align 4
  .weak attnfuse_host_switch
  .hidden attnfuse_host_switch
  .type attnfuse_host_switch, @function
attnfuse_host_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr 8(%rsp)
  fldcw (%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size attnfuse_host_switch, .-attnfuse_host_switch

  .p2align 4
  .weak attnfuse_host_fiber_entry
  .hidden attnfuse_host_fiber_entry
  .type attnfuse_host_fiber_entry, @function
attnfuse_host_fiber_entry:
  movq %r13, %rdi
  callq *%r12
  ud2
  .size attnfuse_host_fiber_entry, .-attnfuse_host_fiber_entry
)");
#endif

namespace attnfuse_host_cuda {
// ThreadSanitizer (test_kernel_races, tests/CMakeLists.txt) takes every mutex, atomic and thread
// start as an ordering, and every access as one to check. The emulator's own bookkeeping (these
// queues, barrier counts, mbarrier words, the thread_locals it swaps, the fiber switch itself)
// orders nothing on the GPU, and all fibers touch it, so it runs inside an Internal scope: TSan
// ignores its synchronisation and its memory accesses there (per fiber: a fiber switched out
// inside one keeps it, the others do not). Without TSan it is empty.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
struct Internal {
#if defined(__SANITIZE_THREAD__)
  Internal() {
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  }
  ~Internal() {
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
  }
#else
  Internal() {}  // (user-provided, so a scope holding one is not an unused variable)
  ~Internal() {}
#endif
  Internal(const Internal&) = delete;
  Internal& operator=(const Internal&) = delete;
};

struct Fiber {
#if defined(ATTNFUSE_HOST_FIBERS_UCONTEXT)
  ucontext_t context;
#else
  void* sp = nullptr;  // where the switch away from it left its registers
#endif
  char* stack = nullptr;  // [stack, stack + stack_size); the launching thread's only as ASan learned it
  size_t stack_size = 0;
  std::function<void()> body;        // this block's emulated thread
  std::function<void()> swap_state;  // exchanges the emulated thread's thread_locals with its own copy
  bool lagging = false;
  void* tsan = nullptr;       // its ThreadSanitizer context
  void* asan_fake = nullptr;  // ASan's fake stack while it is switched out
};

// One block's fibers and their queues. Everything here is the emulator's, touched inside
// Internal scopes, so TSan neither checks nor counts it.
struct Fibers {
  Fiber host;  // the launching thread
  std::deque<Fiber*> ready, ready_lagging;
  std::vector<Fiber*> mbar_waiting;  // woken by every mbarrier update
  Fiber* current = &host;
  Fiber* previous = nullptr;  // the one `current` was switched to from
  int live = 0;
  char launch_key = 0, exit_key = 0;  // (TSan) the launch before each start, each exit before the return
};
inline thread_local Fibers* fibers = nullptr;

// A fault of the emulated kernel or of the emulation itself: a message and an abort.
[[noreturn]] inline void emulation_fault(const char* what) {
  std::fprintf(stderr, "kernel_host: %s\n", what);
  std::abort();
}

namespace fiber_detail {
constexpr size_t kStackBytes = 512 * 1024;
constexpr size_t kGuardBytes = 4096;

// A switch from `from` to `to` in two halves: the bookkeeping (the thread_locals, the current
// fiber), then the jump, which returns when something switches back to `from`. Both inside an
// Internal scope.
inline void hand_over(Fiber& from, Fiber& to) {
  if (from.swap_state) from.swap_state();
  if (to.swap_state) to.swap_state();
  fibers->previous = &from;
  fibers->current = &to;
}
// ASan learns the launching thread's stack from the first switch away from it.
inline void note_previous_stack([[maybe_unused]] const void* stack, [[maybe_unused]] size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  static thread_local const void* host_stack = nullptr;
  static thread_local size_t host_size = 0;
  if (fibers->previous == &fibers->host && host_stack == nullptr) {
    host_stack = stack;
    host_size = size;
  }
  fibers->host.stack = const_cast<char*>(static_cast<const char*>(host_stack));
  fibers->host.stack_size = host_size;
#endif
}
inline void jump(Fiber& from, Fiber& to) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(&from.asan_fake, to.stack, to.stack_size);
#endif
#if defined(__SANITIZE_THREAD__)
  __tsan_switch_to_fiber(to.tsan, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(ATTNFUSE_HOST_FIBERS_UCONTEXT)
  swapcontext(&from.context, &to.context);
#else
  attnfuse_host_switch(&from.sp, to.sp);
#endif
#if defined(__SANITIZE_ADDRESS__)
  const void* prev_stack;
  size_t prev_size;
  __sanitizer_finish_switch_fiber(from.asan_fake, &prev_stack, &prev_size);
  note_previous_stack(prev_stack, prev_size);
#endif
}
inline void switch_to(Fiber& from, Fiber& to) {
  hand_over(from, to);
  jump(from, to);
}

// The next ready fiber, lagging ones last; a block none of whose live threads is ready has
// deadlocked (on the GPU it would hang).
inline Fiber& next_ready() {
  Fibers& f = *fibers;
  std::deque<Fiber*>& q = f.ready.empty() ? f.ready_lagging : f.ready;
  if (q.empty())
    emulation_fault("a deadlock: every live thread of the block waits (a barrier some thread never reaches, or an "
                    "mbarrier phase that never completes)");
  Fiber* next = q.front();
  q.pop_front();
  return *next;
}

// A fiber's life: one emulated thread per block it is given, parked between blocks (in its
// switch away), so its stack and its ThreadSanitizer context serve every block. (A TSan context
// ended and made anew per block cost more than the kernels' own checked accesses.) Its program
// order across blocks orders nothing the launch does not: each block's threads start after the
// launch and end before it returns.
[[noreturn]] inline void work(Fiber* self) {
  {
    Internal internal;
#if defined(__SANITIZE_ADDRESS__)
    const void* prev_stack;
    size_t prev_size;
    __sanitizer_finish_switch_fiber(nullptr, &prev_stack, &prev_size);
    note_previous_stack(prev_stack, prev_size);
#endif
  }
  for (;;) {
#if defined(__SANITIZE_THREAD__)
    __tsan_acquire(&fibers->launch_key);
#endif
    self->body();
#if defined(__SANITIZE_THREAD__)
    __tsan_release(&fibers->exit_key);
#endif
    Internal internal;
    Fibers& f = *fibers;
    --f.live;
    switch_to(*self, f.live == 0 ? f.host : next_ready());  // parked until the next block
  }
}
#if defined(ATTNFUSE_HOST_FIBERS_UCONTEXT)
inline void work_from_ucontext(unsigned hi, unsigned lo) {
  work(reinterpret_cast<Fiber*>((static_cast<uintptr_t>(hi) << 32) | lo));
}
#else
extern "C" inline void work_from_entry(void* self) { work(static_cast<Fiber*>(self)); }
#endif

// Fiber i of this host thread, made on first use: a stack with a guard page below it (a fiber
// that overflows faults there), and the first switch to it starts work().
inline Fiber& worker(size_t i) {
  static thread_local std::vector<std::unique_ptr<Fiber>> pool;
  while (pool.size() <= i) {
    auto fiber = std::make_unique<Fiber>();
    void* m = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) emulation_fault("no memory for a fiber's stack");
    mprotect(m, kGuardBytes, PROT_NONE);
    char* stack = static_cast<char*>(m) + kGuardBytes;
    fiber->stack = stack;
    fiber->stack_size = kStackBytes;
#if defined(__SANITIZE_THREAD__)
    fiber->tsan = __tsan_create_fiber(0);
#endif
#if defined(ATTNFUSE_HOST_FIBERS_UCONTEXT)
    getcontext(&fiber->context);
    fiber->context.uc_stack.ss_sp = stack;
    fiber->context.uc_stack.ss_size = kStackBytes;
    fiber->context.uc_link = nullptr;
    const auto p = reinterpret_cast<uintptr_t>(fiber.get());
    makecontext(&fiber->context, reinterpret_cast<void (*)()>(work_from_ucontext), 2, static_cast<unsigned>(p >> 32),
                static_cast<unsigned>(p & 0xffffffffu));
#else
    // The frame attnfuse_host_switch pops (from the bottom up): the x87 control word and MXCSR
    // (the launching thread's), r15, r14, r13 = the fiber, r12 = work_from_entry, rbx, rbp = 0
    // (backtraces end there), then attnfuse_host_fiber_entry as the return address. The entry
    // calls r12 with the stack 16-byte aligned.
    auto* top = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(stack) + kStackBytes) & ~uintptr_t{15});
    uint64_t* sp = top - 11;
    unsigned mxcsr;
    unsigned short fpu_cw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpu_cw));
    sp[0] = fpu_cw;
    sp[1] = mxcsr;
    sp[2] = sp[3] = 0;  // r15, r14
    sp[4] = reinterpret_cast<uint64_t>(fiber.get());
    sp[5] = reinterpret_cast<uint64_t>(&work_from_entry);
    sp[6] = sp[7] = 0;  // rbx, rbp
    sp[8] = reinterpret_cast<uint64_t>(&attnfuse_host_fiber_entry);
    sp[9] = sp[10] = 0;
    fiber->sp = sp;
#endif
    pool.push_back(std::move(fiber));
  }
  return *pool[i];
}
}  // namespace fiber_detail

// Each of these but fiber_yield is called inside an Internal scope (a scope costs TSan a stack
// record for each of its three ignores, so the callers' one serves).
// The current fiber waits: it has put itself where a fiber_wake() will find it (a barrier's
// waiters, the mbarrier waiters); the next ready fiber runs.
inline void fiber_wait() {
  Fiber& next = fiber_detail::next_ready();
  if (&next != fibers->current) fiber_detail::switch_to(*fibers->current, next);  // (it may be the next itself)
}
// (fiber_current only reads, so it may run outside a scope too: TSan reports a race only against
// a write it saw, and only Internal scopes write these.)
inline Fiber* fiber_current() { return fibers->current; }
inline void fiber_wake(Fiber* fiber) { (fiber->lagging ? fibers->ready_lagging : fibers->ready).push_back(fiber); }
// A barrier's released threads, in arrival order, ahead of every other ready thread (lagging
// ones ahead of the other lagging ones).
inline void fiber_wake_first(const std::vector<Fiber*>& released) {
  for (auto it = released.rbegin(); it != released.rend(); ++it)
    ((*it)->lagging ? fibers->ready_lagging : fibers->ready).push_front(*it);
}
// An mbarrier waiter waits for the next update of any of the block's mbarriers (or a tensor copy
// put in flight, which its next look lands).
inline void fiber_wait_mbarrier() {
  fibers->mbar_waiting.push_back(fibers->current);
  fiber_wait();
}
inline void fiber_wake_mbarrier_waiters() {
  for (Fiber* w : fibers->mbar_waiting) fiber_wake(w);
  fibers->mbar_waiting.clear();
}
// The current fiber lets every other ready one run first (a lagging one: every non-lagging one).
inline void fiber_yield() {
  Internal internal;
  fiber_wake(fiber_current());
  fiber_wait();
}

// Runs `count` emulated threads, body(i) on fiber i, until every one has returned, starting them
// in ascending index order or descending; lagging(i) says which lag. swap_state(i) exchanges the
// thread_locals of the emulated thread with fiber i's own copy (kernel_host.hpp), called as fiber
// i leaves and again as it resumes.
inline void run_fibers(unsigned count, bool descending, const std::function<void(unsigned)>& body,
                       const std::function<bool(unsigned)>& lagging,
                       const std::function<void(unsigned)>& swap_state) {
  Fibers f;
  {
    Internal internal;
    if (fibers != nullptr) emulation_fault("a block launched from inside another block");
    fibers = &f;
    for (unsigned n = 0; n < count; ++n) {
      const unsigned i = descending ? count - 1 - n : n;
      Fiber& t = fiber_detail::worker(i);
      t.body = [&body, i] { body(i); };
      t.swap_state = [&swap_state, i] { swap_state(i); };
      t.lagging = lagging(i);
      fiber_wake(&t);
    }
#if defined(__SANITIZE_THREAD__)
    f.host.tsan = __tsan_get_current_fiber();
#endif
    f.live = static_cast<int>(count);
  }
#if defined(__SANITIZE_THREAD__)
  __tsan_release(&f.launch_key);
#endif
  {
    Internal internal;
    if (count > 0) fiber_detail::switch_to(f.host, fiber_detail::next_ready());
    for (unsigned i = 0; i < count; ++i) {  // (the captures die with this call)
      fiber_detail::worker(i).body = nullptr;
      fiber_detail::worker(i).swap_state = nullptr;
    }
    fibers = nullptr;
  }
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(&f.exit_key);
#endif
}

}  // namespace attnfuse_host_cuda
