// bad_alloc.cc — a C++ program whose `new` fails and lets std::bad_alloc
// go uncaught, as most C++ programs do: the runtime prints "terminate
// called after throwing an instance of 'std::bad_alloc'" and aborts
// (status 134).  The bundle must blame the runtime's end, quote its words,
// name no fault address, and site the failure in grow_table, the program's
// own frame, not in libstdc++'s allocation machinery.  Prints "start".
#include <cstdio>
#include <string>

namespace model {
__attribute__((noinline)) std::string grow_table(std::size_t bytes)
{
    std::string table;
    table.reserve(bytes);
    return table;
}
} // namespace model

int main()
{
    std::puts("start");
    std::fflush(stdout);
    return static_cast<int>(model::grow_table(std::size_t(1) << 45).size());
}
