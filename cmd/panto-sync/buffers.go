package main

import (
	"math/bits"
	"sync"
)

// fileBuffers recycles the buffers session files are read into (a push
// reads every file of the catalog once): class k holds buffers of
// capacity minFileBuffer<<k. A reused buffer costs neither an allocation
// nor its zeroing, and the garbage collector runs less often.
var fileBuffers [fileBufferClasses]sync.Pool

const (
	minFileBuffer     = 64 << 10
	fileBufferClasses = 9 // up to 16 MB; larger files get a buffer of their own
)

// fileBufferClass is the class of the smallest buffer that holds n bytes;
// fileBufferClasses when none does.
func fileBufferClass(n int64) int {
	if n <= minFileBuffer {
		return 0
	}
	return min(bits.Len64(uint64(n-1))-bits.Len64(minFileBuffer-1), fileBufferClasses)
}

// getFileBuffer returns a buffer of length n, from the pool when one fits.
func getFileBuffer(n int64) []byte {
	k := fileBufferClass(n)
	if k == fileBufferClasses {
		return make([]byte, n)
	}
	if b, ok := fileBuffers[k].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, minFileBuffer<<k)
}

// putFileBuffer hands a buffer of getFileBuffer back (nil is ignored).
// Nothing may use it afterwards.
func putFileBuffer(b []byte) {
	k := fileBufferClass(int64(cap(b)))
	if k == fileBufferClasses || cap(b) != minFileBuffer<<k {
		return
	}
	b = b[:0]
	fileBuffers[k].Put(&b)
}
