/*
 * gpu_results.h — the names of the codes a GPU library's allocation or free
 * can return besides success and running out of memory, by library: CUDA's
 * runtime (cudaError_t), its driver (CUresult) and HIP (hipError_t).  The
 * tools print a failed call's code by its name ("result
 * cudaErrorIllegalAddress (code 700)"), and link none of those libraries
 * nor need their headers; the preload's header checks (preload/hooks/check)
 * assert every value against the real headers where they are installed.
 * Kept to what such a call returns: a bad argument, a device or driver that
 * is missing or gone, and the sticky errors an earlier kernel leaves.
 */
#ifndef GMP_GPU_RESULTS_H
#define GMP_GPU_RESULTS_H

#define GMP_FOR_EACH_CUDART_RESULT(X)                                                            \
    X(cudaErrorInvalidValue, 1)                                                                  \
    X(cudaErrorMemoryAllocation, 2)                                                              \
    X(cudaErrorInitializationError, 3)                                                           \
    X(cudaErrorCudartUnloading, 4)                                                               \
    X(cudaErrorInvalidDevicePointer, 17)                                                         \
    X(cudaErrorInsufficientDriver, 35)                                                           \
    X(cudaErrorDevicesUnavailable, 46)                                                           \
    X(cudaErrorNoDevice, 100)                                                                    \
    X(cudaErrorInvalidDevice, 101)                                                               \
    X(cudaErrorStartupFailure, 127)                                                              \
    X(cudaErrorDeviceUninitialized, 201)                                                         \
    X(cudaErrorECCUncorrectable, 214)                                                            \
    X(cudaErrorInvalidResourceHandle, 400)                                                       \
    X(cudaErrorIllegalAddress, 700)                                                              \
    X(cudaErrorLaunchTimeout, 702)                                                               \
    X(cudaErrorContextIsDestroyed, 709)                                                          \
    X(cudaErrorAssert, 710)                                                                      \
    X(cudaErrorHardwareStackError, 714)                                                          \
    X(cudaErrorIllegalInstruction, 715)                                                          \
    X(cudaErrorMisalignedAddress, 716)                                                           \
    X(cudaErrorLaunchFailure, 719)                                                               \
    X(cudaErrorNotPermitted, 800)                                                                \
    X(cudaErrorNotSupported, 801)                                                                \
    X(cudaErrorSystemNotReady, 802)                                                              \
    X(cudaErrorSystemDriverMismatch, 803)                                                        \
    X(cudaErrorCompatNotSupportedOnDevice, 804)                                                  \
    X(cudaErrorStreamCaptureUnsupported, 900)                                                    \
    X(cudaErrorStreamCaptureInvalidated, 901)                                                    \
    X(cudaErrorUnknown, 999)

#define GMP_FOR_EACH_CU_RESULT(X)                                                                \
    X(CUDA_ERROR_INVALID_VALUE, 1)                                                               \
    X(CUDA_ERROR_OUT_OF_MEMORY, 2)                                                               \
    X(CUDA_ERROR_NOT_INITIALIZED, 3)                                                             \
    X(CUDA_ERROR_DEINITIALIZED, 4)                                                               \
    X(CUDA_ERROR_NO_DEVICE, 100)                                                                 \
    X(CUDA_ERROR_INVALID_DEVICE, 101)                                                            \
    X(CUDA_ERROR_INVALID_CONTEXT, 201)                                                           \
    X(CUDA_ERROR_ECC_UNCORRECTABLE, 214)                                                         \
    X(CUDA_ERROR_INVALID_HANDLE, 400)                                                            \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, 700)                                                           \
    X(CUDA_ERROR_LAUNCH_TIMEOUT, 702)                                                            \
    X(CUDA_ERROR_CONTEXT_IS_DESTROYED, 709)                                                      \
    X(CUDA_ERROR_ASSERT, 710)                                                                    \
    X(CUDA_ERROR_HARDWARE_STACK_ERROR, 714)                                                      \
    X(CUDA_ERROR_ILLEGAL_INSTRUCTION, 715)                                                       \
    X(CUDA_ERROR_MISALIGNED_ADDRESS, 716)                                                        \
    X(CUDA_ERROR_LAUNCH_FAILED, 719)                                                             \
    X(CUDA_ERROR_NOT_PERMITTED, 800)                                                             \
    X(CUDA_ERROR_NOT_SUPPORTED, 801)                                                             \
    X(CUDA_ERROR_SYSTEM_NOT_READY, 802)                                                          \
    X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803)                                                    \
    X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804)                                            \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900)                                                \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 901)                                                \
    X(CUDA_ERROR_UNKNOWN, 999)

#define GMP_FOR_EACH_HIP_RESULT(X)                                                               \
    X(hipErrorInvalidValue, 1)                                                                   \
    X(hipErrorOutOfMemory, 2)                                                                    \
    X(hipErrorNotInitialized, 3)                                                                 \
    X(hipErrorDeinitialized, 4)                                                                  \
    X(hipErrorInvalidDevicePointer, 17)                                                          \
    X(hipErrorInsufficientDriver, 35)                                                            \
    X(hipErrorNoDevice, 100)                                                                     \
    X(hipErrorInvalidDevice, 101)                                                                \
    X(hipErrorInvalidContext, 201)                                                               \
    X(hipErrorECCNotCorrectable, 214)                                                            \
    X(hipErrorInvalidHandle, 400)                                                                \
    X(hipErrorIllegalAddress, 700)                                                               \
    X(hipErrorLaunchTimeOut, 702)                                                                \
    X(hipErrorContextIsDestroyed, 709)                                                           \
    X(hipErrorAssert, 710)                                                                       \
    X(hipErrorLaunchFailure, 719)                                                                \
    X(hipErrorNotSupported, 801)                                                                 \
    X(hipErrorStreamCaptureUnsupported, 900)                                                     \
    X(hipErrorStreamCaptureInvalidated, 901)                                                     \
    X(hipErrorUnknown, 999)                                                                      \
    X(hipErrorRuntimeMemory, 1052)                                                               \
    X(hipErrorRuntimeOther, 1053)

#endif
