/* Description: what the application gets back for a pager error
 * (_mt_cu_result, dl.c). A driver call of the pager that fails is logged
 * and becomes -EIO inside the core; the hook then returns the driver's own
 * error, noted for the thread (a sticky CUDA_ERROR_ILLEGAL_ADDRESS must
 * not read as CUDA_ERROR_UNKNOWN), once. A driver torn down at exit
 * (-ESHUTDOWN) reads as CUDA_ERROR_DEINITIALIZED, as the driver says. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>

#include "driver.h"

Test(curesult, pager_errors_as_cuda_results) {
  cr_assert_eq(_mt_cu_result(0), CUDA_SUCCESS);
  cr_assert_eq(_mt_cu_result(CUDA_ERROR_NOT_READY), CUDA_ERROR_NOT_READY);
  cr_assert_eq(_mt_cu_result(-ENOMEM), CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(_mt_cu_result(-E2BIG), CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(_mt_cu_result(-EINVAL), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(_mt_cu_result(-ESHUTDOWN), CUDA_ERROR_DEINITIALIZED);
  cr_assert_eq(_mt_cu_result(-EIO), CUDA_ERROR_UNKNOWN, "no driver error noted");
}

static void *other_thread(void *arg) {
  (void)arg;
  return (void *)(intptr_t)_mt_cu_result(-EIO);
}

Test(curesult, a_driver_error_reaches_the_application_once) {
  _mt_cu_note_error(CUDA_ERROR_ILLEGAL_ADDRESS);
  pthread_t t;
  void *got;
  cr_assert_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
  cr_assert_eq(pthread_join(t, &got), 0);
  cr_assert_eq((CUresult)(intptr_t)got, CUDA_ERROR_UNKNOWN, "another thread's error is not this one's");
  cr_assert_eq(_mt_cu_result(-EIO), CUDA_ERROR_ILLEGAL_ADDRESS);
  cr_assert_eq(_mt_cu_result(-EIO), CUDA_ERROR_UNKNOWN, "taken once");
}
