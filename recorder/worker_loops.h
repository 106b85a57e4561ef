/*
 * worker_loops.h — the worker loops of Python's process pools, listed
 * once.  Each catches every exception of the task it runs and hands it to
 * the process that waits for the result, which raises it again.  The
 * preload names the loop a failure happened under (metadata.json's
 * caught_by: the worker went on from it); gmp-inspect names the pool for a
 * worker's bundle, and tells the main process's death by the loop's frame
 * outermost in the traceback it printed.
 *
 * X(file_end, function, name, owner, runs): a frame of the loop ends its
 * file with file_end and runs function; name is caught_by's; owner and
 * runs are the pool and what its workers run, in words.
 */
#ifndef GMP_WORKER_LOOPS_H
#define GMP_WORKER_LOOPS_H

#define GMP_FOR_EACH_WORKER_LOOP(X)                                                            \
    X("/multiprocessing/pool.py", "worker", "multiprocessing.pool.worker",                     \
      "multiprocessing's Pool", "the function given to the pool")                              \
    X("/concurrent/futures/process.py", "_process_worker",                                     \
      "concurrent.futures.process._process_worker", "concurrent.futures' ProcessPoolExecutor", \
      "the function given to the executor")                                                    \
    X("/torch/utils/data/_utils/worker.py", "_worker_loop",                                    \
      "torch.utils.data._utils.worker._worker_loop", "PyTorch's DataLoader",                   \
      "the dataset's code")                                                                    \
    /* joblib's Parallel (scikit-learn's n_jobs): loky's executor, vendored \
     * in joblib.externals or on its own */                                                    \
    X("/loky/process_executor.py", "_process_worker", "loky.process_executor._process_worker", \
      "joblib's process pool (loky)", "the function given to Parallel")

#endif
