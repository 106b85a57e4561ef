// cxx_oom.cc — a C++ program whose allocation fails inside a namespaced
// function, as c10::alloc_cpu fails under PyTorch, and that checks and
// reports it: the bundle's site must read as C++ (model::reserve(unsigned
// long)), not as its symbol (_ZN5model7reserveEm).  Prints "reserve
// failed" on stderr; exit 1.
#include <cstdio>
#include <cstdlib>

namespace model {
__attribute__((noinline)) void *reserve(std::size_t bytes)
{
    void *volatile p = std::malloc(bytes); // volatile: no tail call to malloc
    return p;
}
} // namespace model

int main()
{
    void *p = model::reserve(std::size_t(1) << 45);
    if (!p) {
        std::fputs("reserve failed\n", stderr);
        return 1;
    }
    std::free(p);
    return 0;
}
