/*
 * empty.c — an empty preload: what loading any library into a process
 * costs, the floor the start-up benchmark measures gpumemprof against.
 */
int gmp_bench_empty_preload;
