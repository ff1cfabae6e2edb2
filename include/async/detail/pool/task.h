// SPDX-License-Identifier: BSL-1.0
//
// task: a move-only, type-erased `void()` callable with an inline buffer, so that the thread
// pool stores small callables (the common case: a lambda with a few captures, or a function
// with its decayed arguments and a promise) without a heap allocation of its own.
#ifndef ASYNC_DETAIL_POOL_TASK_H
#define ASYNC_DETAIL_POOL_TASK_H

#include "../config.h"

#include "../cache.h"
#include "../element.h"
#include "../invoke.h"
#include "../scope_exit.h"
#include "../traits.h"

#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace async {
namespace detail {

// ---- quiet relocation ---------------------------------------------------------------------------

/// Whether destroying a T that has been moved from runs no code of the user's. The pool moves
/// tasks between its queues under its locks, and a move destroys the object moved from: a
/// destructor that ran user code there (one that posts, say) would run under those locks. So
/// only callables for which this holds are kept inline; others live on the heap, and their
/// moves move a pointer. True for trivially destructible types, for a type that says so
/// (a static member `moved_from_is_quiet`), and for the standard types whose moved-from state
/// is empty: strings and vectors (with std::allocator), shared, weak and unique pointers with
/// the default deleter, promises and packaged tasks. (A lambda is judged by its closure type:
/// with a capture that has a destructor of its own, it is not trivially destructible, and
/// nothing can look inside it.) A type says so with a member type `async_moved_from_is_quiet`
/// (std::true_type or std::false_type): a type, so that a data member of a user's callable that
/// happens to have that name is not mistaken for it.
template <typename T, typename = void>
struct moved_from_is_quiet : std::is_trivially_destructible<T> {};
template <typename T>
struct moved_from_is_quiet<T, void_t<typename T::async_moved_from_is_quiet>>
    : std::integral_constant<bool, T::async_moved_from_is_quiet::value> {};
template <typename C, typename Tr>
struct moved_from_is_quiet<std::basic_string<C, Tr, std::allocator<C>>, void> : std::true_type {};
template <typename U>
struct moved_from_is_quiet<std::vector<U, std::allocator<U>>, void> : std::true_type {};
template <typename U>
struct moved_from_is_quiet<std::shared_ptr<U>, void> : std::true_type {};
template <typename U>
struct moved_from_is_quiet<std::weak_ptr<U>, void> : std::true_type {};
template <typename U>
struct moved_from_is_quiet<std::unique_ptr<U, std::default_delete<U>>, void> : std::true_type {};
template <typename R>
struct moved_from_is_quiet<std::promise<R>, void> : std::true_type {};
template <typename S>
struct moved_from_is_quiet<std::packaged_task<S>, void> : std::true_type {};

template <typename... T>
struct all_quiet : std::true_type {};
template <typename T, typename... Rest>
struct all_quiet<T, Rest...>
    : std::integral_constant<bool, moved_from_is_quiet<T>::value && all_quiet<Rest...>::value> {};

// ---- kept by cancel_pending ---------------------------------------------------------------------

/// Whether threadpool::cancel_pending() must leave a queued callable of type T where it is
/// instead of discarding it. A type says so with a member type `async_keep_on_cancel`
/// (std::true_type): async/asio.h's functions do, because Asio expects every function it hands
/// an executor to run (a strand whose function was destroyed unrun would stay locked, and its
/// later handlers would never run).
template <typename T, typename = void>
struct keep_on_cancel : std::false_type {};
template <typename T>
struct keep_on_cancel<T, void_t<typename T::async_keep_on_cancel>>
    : std::integral_constant<bool, T::async_keep_on_cancel::value> {};

// ---- owned by an asio_context
// --------------------------------------------------------------------

/// The owner of a queued callable of type T, for a discard of one owner's tasks (an asio_context
/// takes back what it queued when it stops): what a member `const void* async_owner() const
/// noexcept` returns; null for a type without one.
template <typename T, typename = void>
struct has_owner : std::false_type {};
template <typename T>
struct has_owner<T, void_t<decltype(std::declval<const T&>().async_owner())>> : std::true_type {};

template <typename T>
const void* owner_of(const T& t, std::true_type /*has_owner*/) noexcept {
  return t.async_owner();
}
template <typename T>
const void* owner_of(const T&, std::false_type /*has_owner*/) noexcept {
  return nullptr;
}
template <typename T>
const void* owner_of(const T& t) noexcept {
  return owner_of(t, has_owner<T>());
}

// ---- task ---------------------------------------------------------------------------------------

/// A move-only `void()` callable. Callables of at most inline_size bytes, of fundamental
/// alignment, with a noexcept move constructor and a quiet moved-from state
/// (moved_from_is_quiet) live inside the task; others on the heap, where a move of the task
/// moves a pointer and runs no code of the callable. Not thread-safe (a value type: one owner
/// at a time).
class task {
public:
  static constexpr std::size_t inline_size = 64;

  task() noexcept = default;

  template <typename F, typename D = typename std::decay<F>::type,
            typename = typename std::enable_if<!std::is_same<D, task>::value>::type>
  task(F&& f) { // NOLINT: implicit on purpose, like std::function
    emplace<D>(std::forward<F>(f), std::integral_constant<bool, fits_inline<D>()>());
  }

  task(task&& other) noexcept : ops_(other.ops_) {
    if (ops_ != nullptr) {
      ops_->move(&storage_, &other.storage_);
      other.ops_ = nullptr;
    }
  }

  task& operator=(task&& other) noexcept {
    if (this != &other) {
      reset();
      if (other.ops_ != nullptr) {
        other.ops_->move(&storage_, &other.storage_);
        ops_ = other.ops_;
        other.ops_ = nullptr;
      }
    }
    return *this;
  }

  task(const task&) = delete;
  task& operator=(const task&) = delete;

  ~task() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }

  /// Runs the callable (which must be present). Exceptions propagate.
  void operator()() { ops_->call(&storage_); }

  /// Whether cancel_pending() may discard the task (see keep_on_cancel).
  bool cancellable() const noexcept { return ops_ == nullptr || ops_->cancellable; }

  /// The callable's owner (see has_owner); null for none, or an empty task.
  const void* owner() const noexcept { return ops_ == nullptr ? nullptr : ops_->owner(&storage_); }

  void reset() noexcept {
    if (ops_ != nullptr) {
      ops_->destroy(&storage_);
      ops_ = nullptr;
    }
  }

private:
  using storage_t = typename std::aligned_storage<inline_size, alignof(std::max_align_t)>::type;

  struct operations {
    void (*call)(storage_t*);
    void (*move)(storage_t* to, storage_t* from) noexcept;
    void (*destroy)(storage_t*) noexcept;
    const void* (*owner)(const storage_t*) noexcept;
    bool cancellable;
  };

  template <typename D>
  static constexpr bool fits_inline() {
    return sizeof(D) <= inline_size && alignof(D) <= alignof(std::max_align_t) &&
           std::is_nothrow_move_constructible<D>::value && moved_from_is_quiet<D>::value;
  }

  template <typename D>
  static D* inline_object(storage_t* s) noexcept {
    return reinterpret_cast<D*>(s);
  }
  template <typename D>
  static D*& heap_object(storage_t* s) noexcept {
    return *reinterpret_cast<D**>(s);
  }
  template <typename D>
  static const D* inline_object(const storage_t* s) noexcept {
    return reinterpret_cast<const D*>(s);
  }
  template <typename D>
  static const D* heap_object(const storage_t* s) noexcept {
    return *reinterpret_cast<D* const*>(s);
  }

  template <typename D>
  struct inline_ops {
    static void call(storage_t* s) { (*inline_object<D>(s))(); }
    static void move(storage_t* to, storage_t* from) noexcept {
      ::new (static_cast<void*>(to)) D(std::move(*inline_object<D>(from)));
      inline_object<D>(from)->~D();
    }
    static void destroy(storage_t* s) noexcept { inline_object<D>(s)->~D(); }
    static const void* owner(const storage_t* s) noexcept { return owner_of(*inline_object<D>(s)); }
    static constexpr operations table{&call, &move, &destroy, &owner, !keep_on_cancel<D>::value};
  };

  // Aligned beyond what operator new guarantees: such a callable is allocated with
  // aligned_allocate in every standard, because before C++17 a new-expression ignores the
  // alignment (std::async's own copy lands misaligned there).
  template <typename D>
  using over_aligned = std::integral_constant<bool, (alignof(D) > alignof(std::max_align_t))>;

  template <typename D, typename F>
  static D* make_on_heap(F&& f, std::false_type /*over-aligned*/) {
    return new D(std::forward<F>(f));
  }
  template <typename D, typename F>
  static D* make_on_heap(F&& f, std::true_type /*over-aligned*/) {
    void* memory = aligned_allocate(sizeof(D), alignof(D));
    try {
      return ::new (memory) D(std::forward<F>(f));
    } catch (...) {
      aligned_free(memory);
      throw;
    }
  }
  template <typename D>
  static void free_on_heap(D* p, std::false_type /*over-aligned*/) noexcept {
    delete p;
  }
  template <typename D>
  static void free_on_heap(D* p, std::true_type /*over-aligned*/) noexcept {
    p->~D();
    aligned_free(p);
  }

  template <typename D>
  struct heap_ops {
    static void call(storage_t* s) { (*heap_object<D>(s))(); }
    static void move(storage_t* to, storage_t* from) noexcept {
      ::new (static_cast<void*>(to)) D*(heap_object<D>(from));
    }
    static void destroy(storage_t* s) noexcept {
      free_on_heap(heap_object<D>(s), over_aligned<D>());
    }
    static const void* owner(const storage_t* s) noexcept { return owner_of(*heap_object<D>(s)); }
    static constexpr operations table{&call, &move, &destroy, &owner, !keep_on_cancel<D>::value};
  };

  template <typename D, typename F>
  void emplace(F&& f, std::true_type /*inline*/) {
    ::new (static_cast<void*>(&storage_)) D(std::forward<F>(f));
    ops_ = &inline_ops<D>::table;
  }

  template <typename D, typename F>
  void emplace(F&& f, std::false_type /*heap*/) {
    D* p = make_on_heap<D>(std::forward<F>(f), over_aligned<D>());
    ::new (static_cast<void*>(&storage_)) D*(p);
    ops_ = &heap_ops<D>::table;
  }

  storage_t storage_;
  const operations* ops_ = nullptr;
};

#if ASYNC_CPLUSPLUS < 17
// The definitions that a use by reference (odr-use) needs before C++17's inline variables.
template <typename D>
constexpr task::operations task::inline_ops<D>::table;
template <typename D>
constexpr task::operations task::heap_ops<D>::table;
#endif

// ---- promised_call ------------------------------------------------------------------------------

/// The stored form of threadpool::post(f, args...): a packaged task for the future, and f with
/// the decayed arguments. Calling it runs INVOKE(f, args...) on rvalues of those copies, as
/// std::async does, and destroys f and the arguments before the future becomes ready, as
/// std::async's thread does: a capture that refers to the caller's stack is gone before get()
/// returns. The packaged task stores the result (or the exception) in the shared state and
/// makes it ready after every temporary of the call is gone: no copy of the result, and no
/// reference to the exception, is left on the worker. (The shared state itself is released by
/// whichever side lets go of it last, as with std::promise.) Not thread-safe (one owner).
template <typename R, typename F, typename... Args>
class promised_call {
  using callee = std::tuple<F, Args...>;

public:
  // Moved from, it holds moved-from copies of f and the arguments (see detail::task).
  using async_moved_from_is_quiet = all_quiet<F, Args...>;

  template <typename G, typename... A>
  explicit promised_call(G&& g, A&&... a) : task_(&promised_call::call) {
    callee_.construct(std::forward<G>(g), std::forward<A>(a)...);
  }
  promised_call(promised_call&& other) noexcept(std::is_nothrow_move_constructible<callee>::value)
      : task_(std::move(other.task_)), alive_(other.alive_) {
    if (alive_) {
      callee_.construct(std::move(*other.callee_.get()));
    }
  }
  promised_call(const promised_call&) = delete;
  promised_call& operator=(const promised_call&) = delete;
  promised_call& operator=(promised_call&&) = delete;
  ~promised_call() { end_callee(); }

  std::future<R> get_future() { return task_.get_future(); }

  void operator()() { task_(this); }

private:
  // Runs inside the packaged task: f and the arguments are destroyed (when the call returns or
  // throws) before the packaged task stores what it got. It takes void*, so that the packaged
  // task's type, and its shared state's, depend on R alone: every post() of an R shares one
  // instantiation of them (a distinct one for each callable took most of the compile time of a
  // file of posts, and as much code).
  static R call(void* erased) {
    promised_call* const self = static_cast<promised_call*>(erased);
    const auto done = at_scope_exit([self] { self->end_callee(); });
    return self->invoke_callee(std::index_sequence_for<Args...>());
  }

  // Called with rvalues of the decayed copies, as std::async does.
  template <std::size_t... I>
  R invoke_callee(std::index_sequence<I...>) {
    callee& c = *callee_.get();
    return detail::invoke(std::get<0>(std::move(c)), std::get<I + 1>(std::move(c))...);
  }

  void end_callee() noexcept {
    if (alive_) {
      alive_ = false;
      callee_.destroy();
    }
  }

  std::packaged_task<R(void*)> task_;
  element_storage<callee> callee_;
  bool alive_ = true; // callee_ holds f and the arguments (destroyed once the call is done)
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_POOL_TASK_H
