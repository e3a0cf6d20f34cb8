package cacheblend

// The Go side of the C callbacks. This file holds the //export trampolines, so its preamble may
// only declare things; shim.c defines the C functions that call them. Each callback's user_data
// is a runtime/cgo.Handle to a sink created for one call and deleted when that call returns, so C
// never holds a Go pointer and no global registry is needed.

/*
#include <stdint.h>
#include <stddef.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

//export goCblOnToken
func goCblOnToken(piece *C.char, n C.size_t, token C.int32_t, h C.uintptr_t) C.int {
	s, ok := cgo.Handle(h).Value().(*tokenSink)
	if !ok {
		return 0
	}
	var b []byte
	if n > 0 {
		b = C.GoBytes(unsafe.Pointer(piece), C.int(n))
	}
	if s.onToken(b) {
		return 1
	}
	return 0
}

//export goCblOnProgress
func goCblOnProgress(phase *C.char, done, total C.int64_t, current, message *C.char, h C.uintptr_t) C.int {
	s, ok := cgo.Handle(h).Value().(*progressSink)
	if !ok {
		return 0
	}
	p := Progress{
		Phase:   C.GoString(phase),
		Done:    int64(done),
		Total:   int64(total),
		Current: C.GoString(current),
		Message: C.GoString(message),
	}
	if s.onProgress(p) {
		return 1
	}
	return 0
}

//export goCblOnLog
func goCblOnLog(level C.int, message *C.char, h C.uintptr_t) {
	s, ok := cgo.Handle(h).Value().(*logSink)
	if !ok {
		return
	}
	s.log(LogLevel(level), C.GoString(message))
}
