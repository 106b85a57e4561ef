// cerr_oom.cc — a C++ program that tells of an OOM only through std::cerr
// (libstdc++ writes it with fwrite and putc on stderr), as inference
// servers and their loggers do.  Prints "done" on stdout; exit 0.
#include <iostream>

int main()
{
    std::cerr << "E0000 allocator.cc:128] CUDA out of memory: failed to allocate "
              << (20ull << 30) << " bytes" << std::endl;
    std::cout << "done" << std::endl;
    return 0;
}
