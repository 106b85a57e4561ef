/*
 * speaker.c — a stand-in for a framework's library, built under the names
 * the preload looks for in /proc/self/maps (libtorch_cpu.so, numpy's
 * _multiarray_umath.so, ...): a test preloads one into a process that
 * prints that framework's OOM line, so that the line comes from a process
 * where the framework is loaded, as it does in life.  It does nothing.
 */
int gmp_test_speaker_present(void);
int gmp_test_speaker_present(void)
{
    return 1;
}
