/*
 * fake_fault.c - turning a fault inside fake GPU work into the fake's
 * CUDA_ERROR_ILLEGAL_ADDRESS.
 *
 * Concept: on a GPU, a kernel or copy that touches an unmapped address
 * kills the context with an illegal-address error. Here device addresses
 * that are reserved but not mapped are PROT_NONE, so the same bug raises
 * SIGSEGV (or SIGBUS) on the stream worker running the op. The handler
 * checks the thread-local "op in progress" marker that the worker sets
 * around kernel bodies, copies and sets; if one is set it writes ONE line
 *   fakecuda: illegal address 0x... in kernel NAME (stream 0x...)
 *   fakecuda: illegal address 0x... in copy HtoD (stream 0x...)
 *   fakecuda: illegal address 0x... in memset (stream 0x...)
 * to stderr with write(2) and calls _exit(86). A fault anywhere else is not
 * ours: the previous disposition is restored and the signal re-raised, so
 * the process crashes (or the sanitizer reports) as it would without us.
 *
 * Each worker runs the handler on its own alternate signal stack, so a
 * kernel that overflowed its stack is still reported. The marker uses the
 * initial-exec TLS model: reading it in the handler is a plain
 * thread-pointer load, with no allocation.
 *
 * Under AddressSanitizer, run with ASAN_OPTIONS=handle_segv=0 (and
 * allow_user_segv_handler=1), or ASan keeps SIGSEGV for itself.
 *
 * Threading: installed once under g_fc.mu at cuInit; the handler touches
 * only its own thread's marker and async-signal-safe calls.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_internal.h"

#define FC_FAULT_EXIT 86
#define FC_ALTSTACK_SIZE (64 * 1024)

static __thread const fc_op_t *tls_op __attribute__((tls_model("initial-exec")));
static struct sigaction old_segv, old_bus;
static bool installed;

void fc_fault_enter(const fc_op_t *op) { __atomic_store_n(&tls_op, op, __ATOMIC_RELAXED); }
void fc_fault_leave(void) { __atomic_store_n(&tls_op, NULL, __ATOMIC_RELAXED); }

static size_t put_str(char *b, size_t at, size_t cap, const char *s) {
  while (*s && at + 1 < cap) b[at++] = *s++;
  return at;
}

static size_t put_hex(char *b, size_t at, size_t cap, uintptr_t v) {
  char tmp[2 + 2 * sizeof v];
  size_t n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v);
  at = put_str(b, at, cap, "0x");
  while (n && at + 1 < cap) b[at++] = tmp[--n];
  return at;
}

static void on_fault(int sig, siginfo_t *si, void *uctx) {
  const fc_op_t *op = __atomic_load_n(&tls_op, __ATOMIC_RELAXED);
  if (op) {
    char line[512];
    size_t n = put_str(line, 0, sizeof line, "fakecuda: illegal address ");
    n = put_hex(line, n, sizeof line, (uintptr_t)si->si_addr);
    if (op->kind == FC_OP_KERNEL) {
      n = put_str(line, n, sizeof line, " in kernel ");
      n = put_str(line, n, sizeof line, op->u.k.fn->name);
    } else if (op->kind == FC_OP_COPY) {
      n = put_str(line, n, sizeof line, " in copy ");
      n = put_str(line, n, sizeof line, op->u.copy.what);
    } else {
      n = put_str(line, n, sizeof line, " in memset");
    }
    n = put_str(line, n, sizeof line, " (stream ");
    n = put_hex(line, n, sizeof line, (uintptr_t)op->handle);
    n = put_str(line, n, sizeof line, ")\n");
    ssize_t w = write(2, line, n);
    (void)w;
    _exit(FC_FAULT_EXIT);
  }
  /* not fake GPU work: hand the signal back to whoever had it */
  struct sigaction *old = sig == SIGBUS ? &old_bus : &old_segv;
  if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
    old->sa_sigaction(sig, si, uctx);
    return;
  }
  sigaction(sig, old, NULL);
  if (si->si_code <= 0) raise(sig); /* sent by kill(): would not recur */
  /* a real fault recurs on return, now with the previous disposition */
}

void fc_fault_install(void) {
  if (installed) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
  installed = true;
}

void fc_fault_thread_init(void **altstack) {
  *altstack = NULL;
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = malloc(FC_ALTSTACK_SIZE);
  if (!ss.ss_sp) return;
  ss.ss_size = FC_ALTSTACK_SIZE;
  if (sigaltstack(&ss, NULL) != 0) {
    free(ss.ss_sp);
    return;
  }
  *altstack = ss.ss_sp;
}

void fc_fault_thread_fini(void *altstack) {
  if (!altstack) return;
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_flags = SS_DISABLE;
  sigaltstack(&ss, NULL);
  free(altstack);
}
