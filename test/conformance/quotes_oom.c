/* quotes_oom.c — source that a compiler quotes back in its warnings: the
 * words are about no out-of-memory of the compiler's own. */
#warning "CUDA out of memory. Tried to allocate 2.00 GiB"
int main(void)
{
    int unused;
    const char *log = "java.lang.OutOfMemoryError: Java heap space";
    return 0;
}
