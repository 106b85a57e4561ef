// go_runtime.go — a Go program built with cgo, so the dynamic linker loads
// the preload into it: a C allocation, a nil dereference the Go runtime
// turns into a panic through its own SIGSEGV handler and main recovers,
// goroutines the runtime preempts with SIGURG; with the argument "oom", a
// slice no machine holds, which the Go runtime answers with "fatal error:
// runtime: out of memory" and its own exit_group(2), never the C library's
// exit.
package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"
)

type node struct{ next *node }

func dereference(n *node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recovered: %v", r)
		}
	}()
	return fmt.Errorf("%p", n.next)
}

func main() {
	p := C.malloc(1 << 20)
	C.free(unsafe.Pointer(p))
	fmt.Println(dereference(nil))
	var wg sync.WaitGroup
	sums := make([]int, 4)
	for i := range sums {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 20000000; j++ {
				sums[i] += j % 7
			}
		}(i)
	}
	wg.Wait()
	fmt.Println(sums)
	if len(os.Args) > 1 && os.Args[1] == "oom" {
		big := make([]byte, 1<<46)
		fmt.Println(len(big))
	}
}
