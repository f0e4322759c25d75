#pragma once
// Clang's thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html) as
// DP_ macros: they expand to the attributes under clang and to nothing under g++, so the project
// builds with both and clang checks the locking (`-Wthread-safety`, an error in CI's clang build:
// docs/common.md). Use them with common/mutex.h's Mutex, MutexLock and CondVar:
//
//   Mutex mu_;
//   std::deque<Job> queue_ DP_GUARDED_BY(mu_);
//   void drain_locked() DP_REQUIRES(mu_);

#if defined(__clang__)
#define DP_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define DP_THREAD_ANNOTATION(x)
#endif

#define DP_CAPABILITY(x) DP_THREAD_ANNOTATION(capability(x))
#define DP_SCOPED_CAPABILITY DP_THREAD_ANNOTATION(scoped_lockable)
#define DP_GUARDED_BY(x) DP_THREAD_ANNOTATION(guarded_by(x))
#define DP_PT_GUARDED_BY(x) DP_THREAD_ANNOTATION(pt_guarded_by(x))
#define DP_ACQUIRED_BEFORE(...) DP_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define DP_ACQUIRED_AFTER(...) DP_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define DP_REQUIRES(...) DP_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define DP_ACQUIRE(...) DP_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define DP_RELEASE(...) DP_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define DP_TRY_ACQUIRE(...) DP_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define DP_EXCLUDES(...) DP_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define DP_ASSERT_CAPABILITY(x) DP_THREAD_ANNOTATION(assert_capability(x))
#define DP_RETURN_CAPABILITY(x) DP_THREAD_ANNOTATION(lock_returned(x))
#define DP_NO_THREAD_SAFETY_ANALYSIS DP_THREAD_ANNOTATION(no_thread_safety_analysis)
