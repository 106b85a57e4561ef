// quotes_oom.cc — C++ source that a compiler quotes back: the runtime's
// last words, in a warning and a source line, are no death of the compiler's.
#include <new>
#warning "terminate called after throwing an instance of 'std::bad_alloc'"
int main()
{
    int unused;
    throw std::bad_alloc();
}
